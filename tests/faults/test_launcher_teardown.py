"""A launcher that tears a worker down the way Ray does costs no value already journaled.

When a Ray worker exits (its job ended, its actor killed), Ray SIGKILLs the worker's direct
children and its process group; other launchers kill the whole process tree. Here the training
process does both to itself, with its delivery process still behind (a slow tracker): the
delivery process, in neither, delivers the rest, journals the end, applies the completion rule
and exits by itself. The same
scenario under a real two-node Ray cluster is tests/multinode/test_ray_nodes.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.faults.conftest import Faults, journal_files, missing_and_extra, once, only
from tests.helpers.subprocess_python import JOBS

STEPS = 300

TORN_DOWN_JOB = JOBS / "launcher_teardown.py"


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


@pytest.mark.slow
def test_a_worker_torn_down_as_ray_does_loses_nothing_journaled(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    env = faults.env(FAULT_SLOW="0.5", FAULT_MAX_BATCH="50", TRACKING_CORE_EXIT_TIMEOUT="30")
    job = jobs(TORN_DOWN_JOB, env, args=[td]).wait(60, check=False)
    assert job.returncode == -9, job.explain("the job was not torn down")
    words = job.stdout.split("DELIVERY ")[1].split()
    delivery, before = int(words[0]), int(words[2])
    assert before < 2 * STEPS, "delivery was not behind when the job was torn down: nothing tested"

    want = once(["x"], range(STEPS))
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and not (_gone(delivery) and journal_files(td) == []):
        time.sleep(0.2)
    for backend in ("faulty", "steady"):
        got = only(faults.metrics(backend), ["x"])
        assert got == want, (backend, missing_and_extra(got, want))
        assert [c["status"] for c in faults.events("close", backend)] == ["KILLED"]
    assert _gone(delivery), "the delivery process is still running"
    assert journal_files(td) == []
