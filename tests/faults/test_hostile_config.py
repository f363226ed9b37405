"""Defect 6: a host config the trackers choke on -- a cyclic dict, an object whose ``repr``
raises, a generator, a lambda, tensors -- passed as ``args`` and ``config`` to ``start_run``
and ``attach``, and to ``log_config``. Nothing raises, the delivery process stays up (only
plain, converted data crosses to it), and the run works."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.conftest import Faults, journal_files, once
from tests.helpers.subprocess_python import JOBS

JOB = JOBS / "hostile_config.py"


@pytest.mark.slow
def test_a_hostile_host_config_never_raises_and_the_run_works(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    job = jobs(JOB, faults.env(), args=[td]).wait()
    result = job.result
    assert result["raised"] == []
    assert result["primary"]["status"] == "FINISHED"
    assert result["primary"]["drained"] is True, result["primary"]["describe"]
    assert result["secondary"]["drained"] is True, result["secondary"]["describe"]
    assert faults.metrics() == once(["x"], range(20)) + once(["actor/loss"], range(20))
    configs = faults.events("config")
    namespaces = sorted({c["namespace"] for c in configs})
    assert namespaces == ["actor", "launch"], configs
    # The plain parts of the config arrived as they were.
    assert any(c["params"].get("lr") == 0.1 for c in configs if c["namespace"] == "launch")
    assert any(c["params"].get("actor/lr") == 0.2 for c in configs if c["namespace"] == "actor")
    assert not [c for c in configs if "<unserialisable>" in c["params"]]
    assert [c["status"] for c in faults.events("close") if c["primary"]] == ["FINISHED"]
    assert "ended unexpectedly" not in job.stderr  # the delivery processes never died
    assert "Traceback" not in job.stderr, job.stderr[-4000:]
    assert journal_files(td) == []
