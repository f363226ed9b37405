"""Defect 3 (journal lines): a cut line (what a short write leaves, ended by the writer's next
newline) and a garbage line, written by the test into a live journal segment. Delivery reads past
them, the bad lines are reported, and ``tracking-core sync`` does not reject the whole file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.faults.conftest import Faults, explain_sync, journal_files, live_segment, once, sync
from tests.helpers.subprocess_python import JOBS

CUT = b'{"n":999999,"t":"row","ts":1.5,"m":{"x":0.'
GARBAGE = b"\x00\xff this is not json at all \xfe\n"

JOB = JOBS / "journal_damage.py"


def _damage(segment: Path) -> None:
    """Append a cut line and a garbage line, each in one O_APPEND write (as the writer's own
    appends are), so neither interleaves with a line of the writer."""
    fd = os.open(segment, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, CUT + b"\n")
        os.write(fd, GARBAGE)
    finally:
        os.close(fd)


def _mentions_segment(text: str, segment: Path) -> bool:
    return segment.name in text or str(segment.parent) in text


@pytest.mark.slow
def test_delivery_reads_past_a_cut_and_a_garbage_line(faults: Faults, tmp_path: Path, jobs) -> None:
    td = tmp_path / "td"
    job = jobs(JOB, faults.env(), args=[td, 20, 20])
    job.readline_until("READY")
    segment = live_segment(td)
    _damage(segment)
    job.send("go\n")
    job.wait()
    assert faults.metrics() == once(["x"], range(200))
    assert [c["status"] for c in faults.events("close")] == ["FINISHED"]
    summary = job.result["summary"]
    assert summary["drained"] is True and summary["journal"] is None, summary["describe"]
    assert "Traceback" not in job.stderr, job.stderr[-4000:]
    # Reported: in a warning naming the journal, or in the finish summary.
    reported = [w for w in job.warnings if _mentions_segment(w, segment)]
    in_summary = "line" in summary["describe"]
    assert reported or in_summary, f"the bad lines in {segment} were not reported: {job.warnings}"
    assert len(reported) <= 2, reported  # reported, not once per poll
    assert journal_files(td) == []


@pytest.mark.slow
def test_sync_reads_past_a_cut_and_a_garbage_line(faults: Faults, tmp_path: Path, jobs) -> None:
    td = tmp_path / "td"
    faults.go_down()  # nothing is delivered during the run: all of it is for sync
    job = jobs(JOB, faults.env(), args=[td, 1, 3])
    job.readline_until("READY")
    segment = live_segment(td)
    _damage(segment)
    job.send("go\n")
    job.wait()
    assert faults.metrics() == once(["x"], [])
    assert journal_files(td), job.result["summary"]["describe"]

    faults.come_back()
    done = sync(td, faults.env())
    assert "Traceback" not in done.stderr, explain_sync(done)
    assert faults.metrics() == once(["x"], range(200)), explain_sync(done)
    assert [c["status"] for c in faults.events("close")] == ["FINISHED"]
    said = (done.stdout + done.stderr).lower()
    assert "line" in said, explain_sync(done)  # the bad lines are reported
    assert journal_files(td) == []
