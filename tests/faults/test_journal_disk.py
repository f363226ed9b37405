"""Defect 10: leftovers and growth. After a clean finish nothing is left under
``<tracking_dir>/journal`` (no empty folders, no ``.progress`` files); a long run with small
segments keeps the journal's disk use bounded while it goes on (fully acknowledged segments are
deleted)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.faults.conftest import Faults, journal_entries, once, tree_size
from tests.helpers.subprocess_python import JOBS

CLEAN_JOB = JOBS / "journal_disk.py"


@pytest.mark.slow
def test_nothing_is_left_in_the_journal_after_a_clean_finish(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    job = jobs(CLEAN_JOB, faults.env(), args=[td]).wait()
    for key in ("primary", "secondary"):
        summary = job.result[key]
        assert summary["drained"] is True and summary["journal"] is None, summary["describe"]
    assert faults.metrics() == once(["x"], range(100)) + once(["actor/loss"], range(100))
    assert journal_entries(td) == []
    assert list(td.rglob("*.progress")) == []


GROWTH_JOB = JOBS / "journal_disk_growth.py"

SEGMENT = 65536


@pytest.mark.slow
def test_the_journal_stays_bounded_while_a_long_run_goes_on(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    env = faults.env(FAULT_COUNT_ONLY="1", TRACKING_CORE_SEGMENT_BYTES=str(SEGMENT))
    job = jobs(GROWTH_JOB, env, args=[td])
    job.readline_until("STARTED")
    sizes: list[int] = []
    segments: set[str] = set()
    while job.proc.poll() is None:
        journal = td / "journal"
        sizes.append(tree_size(journal))
        segments.update(p.name for p in journal.rglob("seg-*.jsonl"))
        time.sleep(0.1)
    job.wait()
    result = job.result
    values = result["steps"] * 20
    assert result["summary"]["logged"] == values
    assert sum(c["n"] for c in faults.events("batch")) == values
    written = values * 45  # bytes: each value is ~45 bytes of JSON in the journal, at least
    assert written > 3 << 20, f"only ~{written} bytes journaled: the run was too short to tell"
    assert len(sizes) > 40
    # Bounded by what is not yet acknowledged (about a second of logging here) plus a segment,
    # far below what the run journaled.
    assert max(sizes) < 1536 * 1024, f"the journal grew to {max(sizes)} bytes"
    assert len(segments) > 10, sorted(segments)  # it rotated
    assert journal_entries(td) == []
