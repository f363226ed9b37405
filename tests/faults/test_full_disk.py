"""Defect 3 (disk): the tracking directory on a tiny tmpfs that fills during the run, and one
that fills and then frees. Logging and ``finish`` never raise, the job exits 0, every value
reaches the tracker once (what the journal cannot take goes to the spill journal in $TMPDIR), the
summary counts the values spilled, and the user gets one clear warning naming the directory -- not a
traceback every flush interval."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.conftest import Faults, fill, journal_files, once
from tests.helpers.subprocess_python import JOBS

STEPS = 3000
KEYS = [f"m{k}" for k in range(8)]

JOB = JOBS / "full_disk.py"


def _run(faults: Faults, tmpfs, jobs, free_at: int):
    td = tmpfs("1m", name="small-disk")
    ballast = fill(td, leave=96 * 1024)
    # A slowish tracker and one big segment: the journal outgrows the free space, whatever the
    # core's rotation does.
    env = faults.env(
        FAULT_SLOW="0.02", FAULT_MAX_BATCH="400", TRACKING_CORE_SEGMENT_BYTES=str(16 << 20)
    )
    job = jobs(JOB, env, args=[td, ballast, free_at, STEPS]).wait(180)
    return td, job


def _assert_promise(faults: Faults, td: Path, job) -> dict:
    result = job.result
    # The run journals ~480 KB where 96 KiB are free: the disk fills (a write that fails may be
    # rolled back, so the free space seen is near zero, not zero).
    assert result["min_free"] < 32 * 1024, f"the disk never filled: {result['min_free']} bytes free"
    assert result["raised"] == [], result["raised"]
    summary = result["summary"]
    assert summary["status"] == "FINISHED"
    assert summary["logged"] == STEPS * len(KEYS)
    want = once(KEYS, range(STEPS))
    got = faults.metrics()
    assert got == want, f"{sum((want - got).values())} values missing"
    # ... and each sent once: an acknowledgement that cannot be written does not re-send.
    assert faults.metrics(raw=True) == want
    assert [c["status"] for c in faults.events("close")] == ["FINISHED"]
    assert summary["drained"] is True, summary["describe"]
    assert "Traceback" not in job.stderr, job.stderr[-4000:]
    assert len(job.warnings) < 10, job.warnings  # not one per flush interval
    return summary


@pytest.mark.slow
def test_a_disk_that_fills_during_the_run(faults: Faults, tmp_path: Path, tmpfs, jobs) -> None:
    td, job = _run(faults, tmpfs, jobs, free_at=-1)
    summary = _assert_promise(faults, td, job)
    # What the full journal could not take went to the spill journal, not to memory; delivered,
    # it is removed with the journal.
    assert summary["spilled"] > 0 and summary["not_journaled"] == 0, summary["describe"]
    assert summary["spill"] and not Path(summary["spill"]).exists()
    named = job.warnings_mentioning(str(td))
    # Each kind of warning once: the journal is full; perhaps writable again once delivered
    # segments are deleted (on a slow machine the journal is longest when the disk fills, and its
    # collection frees the most); perhaps the delivery's progress could not be saved meanwhile.
    assert 1 <= len(named) <= 3 and len(set(named)) == len(named), job.warnings
    assert journal_files(td) == []


@pytest.mark.slow
def test_a_disk_that_fills_then_frees(faults: Faults, tmp_path: Path, tmpfs, jobs) -> None:
    td, job = _run(faults, tmpfs, jobs, free_at=2000)
    summary = _assert_promise(faults, td, job)
    assert 0 < summary["spilled"] < STEPS * len(KEYS) and summary["not_journaled"] == 0, summary["describe"]
    named = job.warnings_mentioning(str(td))
    # full (and, perhaps, writable again; the delivery's progress not saved meanwhile), each once
    assert 1 <= len(named) <= 3 and len(set(named)) == len(named), job.warnings
    assert journal_files(td) == []
