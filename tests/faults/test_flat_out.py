"""The intake at any rate: threads that log back to back, as fast as the interpreter lets them.

A loop that logs faster than the pump journals used to starve the pump (it wrote only once its
queue was empty): nothing reached the journal, the training process's memory grew without bound
and ``finish`` never returned while the loop went on. Here, in real jobs with the jsonl backend:
a kill -9 loses at most about the last second of logging, whatever the rate and the number of
threads; the training process's memory stays within the documented bound (backpressure, in the
summary); ``finish(timeout=2)`` returns within about 3 s while another thread logs flat out; and
a thread that logs during or after ``finish`` is told "after finish", never "free space".
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.faults.conftest import Faults, explain_sync, sync
from tests.helpers.subprocess_python import JOBS

#: How long the jobs log flat out before the fault (seconds).
FLAT_OUT = 2.5

KILL_JOB = JOBS / "flat_out_kill.py"


def _steps(jsonl_dir: Path) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for path in jsonl_dir.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            obj = json.loads(line)
            if obj.get("type") == "metric":
                out.setdefault(obj["name"], set()).add(obj["step"])
    return out


@pytest.mark.parametrize("threads", [1, 3])
def test_kill_9_while_threads_log_flat_out_loses_at_most_the_last_second(
    faults: Faults, tmp_path: Path, jobs, threads: int
) -> None:
    td = tmp_path / "td"
    env = faults.env()
    job = jobs(KILL_JOB, env, args=[td, threads])
    marks: list[tuple[str, int, float]] = []
    started = time.time()
    while time.time() - started < FLAT_OUT:
        k, step, at = job.readline_until("MARK ").split()
        marks.append((f"t{k}", int(step), float(at)))
    killed_at = time.time()
    # The training process only: its delivery process (in its own session) recovers.
    os.kill(job.proc.pid, signal.SIGKILL)
    job.wait(30, check=False)
    # What the delivery process could not deliver within its exit timeout, sync does.
    proc = sync(td, env, timeout=120)
    assert proc.returncode == 0, explain_sync(proc)
    got = _steps(td / "jsonl")
    for name in {m[0] for m in marks}:
        # every step logged more than a second before the kill
        due = max(
            (step for n, step, at in marks if n == name and at <= killed_at - 1.0), default=-1
        )
        assert due > 0, f"{name}: no mark a second before the kill ({marks[:3]})"
        missing = [s for s in range(due + 1) if s not in got.get(name, set())]
        assert not missing, (
            f"{name}: {len(missing)} of the {due + 1} steps logged more than 1 s before the kill "
            f"are missing (first {missing[:5]}); delivered {len(got.get(name, ()))}"
        )


MEMORY_JOB = JOBS / "flat_out_memory.py"

#: The bound (TRACKING_CORE_QUEUE_RECORDS) and a generous size of one queued call of 20 values
#: (its dict copy, the tuple, the timestamp), with the journal's write buffers and the chunk being
#: converted as the slack.
BOUND = 10_000
CALL_BYTES = 2_000
SLACK = 24 << 20


def test_memory_stays_within_the_bound_while_logging_flat_out(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    # The fault backend counts each batch it gets (one line a batch): delivery keeps up.
    job = jobs(MEMORY_JOB, faults.env(FAULT_COUNT_ONLY="1"), args=[tmp_path / "td", FLAT_OUT]).wait(
        120
    )
    result = job.result
    assert not result["gave_up"], f"memory grew past 400 MiB after {result['calls']:,} calls"
    assert result["peak"] <= BOUND * CALL_BYTES + SLACK, (
        f"the training process grew {result['peak'] / 2**20:.0f} MiB while logging {result['calls']:,} "
        f"calls flat out; the bound is {BOUND:,} calls (about {BOUND * CALL_BYTES / 2**20:.0f} MiB)"
    )
    summary = result["summary"]
    # The loop outpaced the pump: it journaled for it (the summary says so), and nothing was lost.
    assert summary["relieved"] > 0, summary["describe"]
    assert "backpressure" in summary["describe"]
    assert summary["drained"] is True, summary["describe"]
    assert summary["logged"] == 20 * (result["calls"] + 1)
    assert sum(c["n"] for c in faults.events("batch")) == summary["logged"]


FINISH_JOB = JOBS / "flat_out_finish.py"


def _warnings_after_finish(job) -> None:
    after = job.warnings_mentioning("after finish")
    assert after, job.warnings
    wrong = [w for w in job.warnings if "free space" in w or "cannot write its journal" in w]
    assert not wrong, wrong


def test_finish_keeps_its_bound_while_another_thread_logs_flat_out(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    job = jobs(FINISH_JOB, faults.env(), args=[tmp_path / "td", FLAT_OUT, 0]).wait(60)
    result = job.result
    assert result["took"] <= 3.0, f"finish(timeout=2) took {result['took']:.1f} s"
    assert result["summary"]["status"] == "FINISHED"
    _warnings_after_finish(job)


def test_a_thread_logging_during_and_after_finish_is_told_after_finish(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    # A pace the pump keeps up with: finish journals the end while the thread goes on.
    job = jobs(FINISH_JOB, faults.env(), args=[tmp_path / "td", 1.0, 0.001]).wait(120)
    _warnings_after_finish(job)
    summary = job.result["summary"]
    assert summary["drained"] is True, summary["describe"]
