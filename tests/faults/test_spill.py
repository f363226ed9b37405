"""One input path into delivery: what the journal cannot take goes to a spill journal, not over
a pipe.

Records that could not be journaled (a full disk) used to reach the delivery process only in
memory, over its pipe: a delivery process killed during the outage took them with it, and no
``tracking-core sync`` could bring them back. Now they go to a spill journal in ``$TMPDIR``, named
in the journal's ``meta.json``, and every follower (the delivery process, its successor, sync)
reads the journal, the spill journal and what memory holds in record order.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import Faults, explain_sync, fill, once, sync
from tests.helpers.subprocess_python import JOBS
from tracking_core.delivery import stream as stream_module
from tracking_core.delivery.journal import JournalWriter, dumps
from tracking_core.delivery.stream import Stream

STEPS = 3000
KEYS = [f"m{k}" for k in range(8)]

JOB = JOBS / "spill.py"


def _small_disk(faults: Faults, tmp_path: Path, tmpfs: Any, slow: str) -> tuple[Path, Path, dict[str, str]]:
    """A tracking directory on a nearly full 1 MiB disk, a spill location beside it, and the
    job's environment: a tracker that takes ``slow`` seconds a batch, one big segment."""
    td = tmpfs("1m", name="small-disk")
    fill(td, leave=96 * 1024)
    spill_root = tmp_path / "tmp"
    spill_root.mkdir()
    env = faults.env(
        FAULT_SLOW=slow,
        FAULT_MAX_BATCH="400",
        TRACKING_CORE_SEGMENT_BYTES=str(16 << 20),
        TMPDIR=str(spill_root),
    )
    return td, spill_root, env


@pytest.mark.slow
def test_full_disk_and_the_delivery_process_killed_during_the_outage_lose_nothing(
    faults: Faults, tmp_path: Path, tmpfs, jobs
) -> None:
    # A slowish tracker and one big segment: the journal outgrows the free space.
    td, spill_root, env = _small_disk(faults, tmp_path, tmpfs, slow="0.02")
    job = jobs(JOB, env, args=[td, STEPS]).wait(180)
    result = job.result
    assert result["killed"], "the disk never filled"
    proc = sync(td, env)
    want = once(KEYS, range(STEPS))
    got = faults.metrics()
    missing = want - got
    assert not missing, f"{sum(missing.values())} values lost (e.g. {sorted(missing)[:5]})"
    assert proc.returncode == 0, explain_sync(proc)
    assert [c["status"] for c in faults.events("close")] == ["FINISHED"]
    # The summary counts what went to the spill journal (nothing went from memory only) and
    # the delivery process's restart.
    summary = result["summary"]
    assert summary["spilled"] > 0 and summary["not_journaled"] == 0, summary["describe"]
    assert summary["restarts"] == 1, summary["describe"]
    assert "journaled in" in summary["describe"] and "started again" in summary["describe"]
    # Delivered, the spill journal goes with the journal.
    assert [p for p in spill_root.rglob("*") if p.is_file()] == []


LEFT_BEHIND_JOB = JOBS / "spill_left_behind.py"


@pytest.mark.slow
def test_sync_delivers_a_spill_journal_left_behind(
    faults: Faults, tmp_path: Path, tmpfs, jobs
) -> None:
    # A tracker slow enough that much is still to deliver when both processes die.
    td, spill_root, env = _small_disk(faults, tmp_path, tmpfs, slow="0.3")
    job = jobs(LEFT_BEHIND_JOB, env, args=[td])
    delivery, steps = map(int, job.readline_until("PIDS ").split())
    # Both processes die in the middle of the outage: the journal and the spill journal stay.
    os.kill(job.proc.pid, signal.SIGKILL)
    os.kill(delivery, signal.SIGKILL)
    job.wait(30, check=False)
    spilled = [p for p in spill_root.rglob("seg-*.jsonl")]
    proc = sync(td, env)
    got = faults.metrics()
    missing = once(KEYS, range(steps)) - got
    assert not missing, f"{sum(missing.values())} values lost (e.g. {sorted(missing)[:5]})"
    assert spilled, "nothing was spilled"
    assert proc.returncode == 0, explain_sync(proc)
    assert [c["status"] for c in faults.events("close")] == ["KILLED"]
    assert [p for p in spill_root.rglob("*") if p.is_file()] == []


def _records(writer: JournalWriter, numbers: range) -> None:
    lines = "".join(
        dumps({"n": n, "t": "row", "ts": 0.0, "m": {"x": float(n)}, "st": n, "sk": None}) + "\n"
        for n in numbers
    )
    writer.append(lines.encode())


def _row(n: int) -> dict:
    return {"n": n, "t": "row", "ts": 0.0, "m": {"x": float(n)}, "st": n, "sk": None}


def test_the_stream_reads_journal_spill_and_memory_in_record_order(
    tmp_path: Path, monkeypatch
) -> None:
    journal = JournalWriter(tmp_path / "journal", {}, 1 << 20)
    spill = JournalWriter(tmp_path / "spill", {}, 1 << 20)
    _records(journal, range(0, 10))
    _records(spill, range(10, 20))  # the disk was full
    _records(journal, range(20, 30))  # and took records again
    stream = Stream(tmp_path / "journal", spill=tmp_path / "spill")
    stream.put(("records", [_row(n) for n in range(30, 35)]))  # no journal could take these
    _records(journal, range(35, 40))
    assert [o["n"] for o in stream.take(1000)] == list(range(40))

    # A number found nowhere (memory lost with a delivery process) is waited for while the
    # writer runs, then skipped and counted.
    monkeypatch.setattr(stream_module, "GAP_GRACE", 0.3)
    _records(spill, range(45, 50))
    assert stream.take(1000) == []
    time.sleep(0.35)
    assert [o["n"] for o in stream.take(1000)] == list(range(45, 50))
    assert stream.lost == 5

    # A write that failed half-way in the journal went whole to the spill journal: no repeat.
    _records(journal, range(50, 53))
    _records(spill, range(50, 55))
    assert [o["n"] for o in stream.take(1000)] == list(range(50, 55))

    # A follower started later (a new delivery process, sync) finds the same order from the
    # files alone, from where its acknowledgements say; the writer gone, a gap is not waited for.
    again = Stream(tmp_path / "journal", spill=tmp_path / "spill", start=14)
    taken = [o["n"] for o in again.take(1000, final=True)]
    assert taken == list(range(15, 30)) + list(range(35, 40)) + list(range(45, 55))
    assert again.lost == 10
