"""Bad arguments never reach the training loop as exceptions, and a bad run handle is one error.

* ``log_metrics`` of a lazy metrics view that raises while it is read (anything, not only
  ``TypeError``), and ``flush`` / ``finish`` with a timeout that is a string, negative, NaN,
  infinite or None: no exception; one warning per kind of call; the argument treated sensibly
  (a numeric string as its number, a negative as 0, NaN as the default) and every good value
  delivered.
* A malformed ``$TRACKING_CORE_RUN`` (``[]``, ``{}``, garbage, a path that does not exist, an
  object missing fields or holding ``null``) is one ``ValueError`` that says the handle is
  malformed, where it came from and what a handle looks like.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracking_core
from tests.faults.conftest import Faults, once
from tests.helpers.subprocess_python import JOBS

JOB = JOBS / "bad_arguments.py"


@pytest.mark.slow
def test_bad_metrics_and_timeouts_never_raise(faults: Faults, tmp_path: Path, jobs) -> None:
    job = jobs(JOB, faults.env(), args=[tmp_path / "td"]).wait()
    result = job.result
    assert result["raised"] == [], result["raised"]
    flushed = result["flushed"]
    assert all(flushed[k] is True for k in ("str", "nan", "none", "inf", "word", "list")), flushed
    assert isinstance(flushed["neg"], bool), flushed  # no wait at all: may be before delivery
    summary = result["summary"]
    assert summary["status"] == "FINISHED" and summary["drained"] is True, summary["describe"]
    assert faults.metrics() == once(["x"], range(10))  # every good value, nothing of the bad
    # One warning per kind of call, naming the call and what was done instead.
    told = job.warnings_mentioning("log_metrics")
    assert len(told) == 1 and "nothing logged" in told[0], job.warnings
    assert "RuntimeError" in told[0] or "ZeroDivisionError" in told[0] or "KeyError" in told[0]
    flush_told = job.warnings_mentioning("flush(timeout=")
    assert len(flush_told) == 1 and "'5'" in flush_told[0] and "5 s" in flush_told[0], job.warnings
    finish_told = job.warnings_mentioning("finish(timeout=")
    assert len(finish_told) == 1 and "20 s" in finish_told[0], job.warnings
    assert "Traceback" not in job.stderr, job.stderr[-4000:]


# -- the run handle ------------------------------------------------------------------------------
MALFORMED = [
    "[]",
    "{}",
    "garbage",
    "/no/such/run/handle.json",
    '{"run_id": "r1"}',
    '{"run_id": null, "tracking_dir": "/tmp/td"}',
    '{"run_id": "r1", "tracking_dir": ["/tmp/td"]}',
    '"r1"',
    "12",
    '{"run_id": "r1", "tracking_dir": ',
]


@pytest.mark.parametrize("value", MALFORMED)
def test_a_malformed_run_handle_is_one_error_that_says_what_a_handle_is(
    value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # "garbage" and "12" name no file here
    monkeypatch.setenv("TRACKING_CORE_RUN", value)
    with pytest.raises(ValueError) as caught:
        tracking_core.attach(role="actor", writer=True, collect=False)
    message = str(caught.value)
    assert "malformed tracking-core run handle" in message, message
    assert "$TRACKING_CORE_RUN" in message  # where it came from
    assert '"run_id"' in message and '"tracking_dir"' in message  # what one looks like
    assert not isinstance(caught.value, (FileNotFoundError, json.JSONDecodeError, KeyError))


def test_a_saved_handle_or_its_folder_still_parses(tmp_path: Path) -> None:
    handle = tracking_core.RunHandle(run_id="r1", name="r1", tracking_dir=str(tmp_path))
    path = handle.save()
    assert tracking_core.RunHandle.parse(path) == handle
    assert tracking_core.RunHandle.parse(path.parent) == handle
    assert tracking_core.RunHandle.parse(handle.to_json()) == handle
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="malformed tracking-core run handle: .* holds no handle"):
        tracking_core.RunHandle.parse(path)
