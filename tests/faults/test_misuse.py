"""Misuse is told, not hidden: a call after ``finish`` changes nothing (no tracker call, no saved
file rewritten) and warns once; a malformed ``$TRACKING_CORE_RUN`` is an error that says it is
malformed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.conftest import Faults
from tests.helpers.subprocess_python import JOBS

AFTER_FINISH_JOB = JOBS / "misuse.py"


@pytest.mark.slow
def test_calls_after_finish_change_nothing_and_warn_once(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    job = jobs(AFTER_FINISH_JOB, faults.env(), args=[td]).wait()
    result = job.result
    assert result["raised"] == []
    calls = faults.calls()
    close = max(i for i, c in enumerate(calls) if c.get("ev") == "close")
    assert calls[close + 1 :] == [], calls[close + 1 :]  # no tracker call after the close
    assert [c["params"].get("lr") for c in faults.events("config")] == [0.1]
    assert result["changed"] == []  # no saved file rewritten
    told = result["misuse_warnings"]
    # Warned, once (per kind of call), not once per call.
    assert 1 <= len(told) <= 2 and all("finish" in w for w in told), told


MALFORMED_JOB = JOBS / "misuse_malformed.py"

MALFORMED = [
    '{"run_id": "r1", "tracking_dir": ',  # cut short
    '{"run_id": 1}',  # fields missing
    '{"run_id": "r1", "name": "r1", "tracking_dir": "/tmp/td", "backends": 7}',  # wrong type
]


def test_a_malformed_run_handle_is_an_error_that_says_so(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    job = jobs(MALFORMED_JOB, faults.env(), args=MALFORMED).wait()
    results = job.result["results"]
    assert len(results) == len(MALFORMED)
    for value, outcome in zip(MALFORMED, results, strict=True):
        assert outcome is not None, f"attach accepted TRACKING_CORE_RUN={value!r}"
        message = outcome["message"]
        assert "malformed" in message.lower(), (value, outcome)
        assert "run_id" in message, (value, outcome)  # and says what a handle looks like
