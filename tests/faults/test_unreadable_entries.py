"""Whole journal lines that are no record this version can deliver: a record of a known kind with
a field of the wrong type or missing (an edited or damaged journal), and a record of a kind a
later version wrote. Each is set aside (the first counted as refused, the second skipped), the
records after them are delivered, and ``tracking-core sync`` completes the journal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.faults.conftest import Faults, explain_sync, journal_files, live_segment, once, sync
from tests.helpers.subprocess_python import JOBS

JOB = JOBS / "unreadable_entries.py"

#: Steps whose rows are replaced, and by what (the record number is kept).
REPLACED = {
    3: {"t": "row", "ts": "soon", "m": {"x": 3.0}, "st": 3, "sk": None},  # a timestamp of the wrong type
    5: {"t": "video", "ts": 1.0, "k": "clip"},  # a kind of a later version
    7: {"t": "table", "ts": 1.0},  # a table without its key, columns and rows
}


def _replace_rows(segment: Path) -> None:
    lines = []
    for line in segment.read_text().splitlines():
        obj = json.loads(line)
        if obj["t"] == "row" and obj.get("st") in REPLACED:
            obj = {"n": obj["n"], **REPLACED[obj["st"]]}
        lines.append(json.dumps(obj, separators=(",", ":")))
    segment.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_sync_sets_aside_entries_it_cannot_read_and_completes_the_journal(faults: Faults, tmp_path: Path, jobs) -> None:
    td = tmp_path / "td"
    faults.go_down()  # nothing is delivered during the run: all of it is for sync
    job = jobs(JOB, faults.env(), args=[td])
    job.wait()
    segment = live_segment(td)
    _replace_rows(segment)

    faults.come_back()
    done = sync(td, faults.env())
    assert done.returncode == 0 and "Traceback" not in done.stderr, explain_sync(done)
    assert faults.metrics() == once(["x"], [s for s in range(20) if s not in REPLACED]), explain_sync(done)
    assert [c["status"] for c in faults.events("close")] == ["FINISHED"], explain_sync(done)
    assert journal_files(td) == [], explain_sync(done)
