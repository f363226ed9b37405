"""Defect 1: values lost silently when several threads log, across a delivery-process restart
and a ``tracking-core sync``.

Eight threads log concurrently (distinct keys, every step) a mapping whose values are computed
when read (a host's lazy stats object: the copy a log call makes runs Python code, so a thread
can be preempted inside the call), with the interpreter switching threads as often as it can:
the order in which calls reach the journal and the order of any number taken at their start
disagree. Meanwhile the delivery process is SIGKILLed twice (and started again),
and the tracker goes down before ``finish``, so the rest waits for ``tracking-core sync``.
Every value must reach the tracker exactly once: an acknowledgement is exact, never a watermark
over numbers assigned before the append.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.faults.conftest import Faults, journal_files, missing_and_extra, once, sync
from tests.helpers.subprocess_python import JOBS

THREADS = 8

JOB = JOBS / "threads_restart_sync.py"


@pytest.mark.slow
def test_eight_threads_a_restarted_delivery_process_and_sync_deliver_every_value_once(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    # A slow tracker in small batches: a backlog (and many acknowledgements) at every kill.
    faults.switches.update(FAULT_SLOW="0.01", FAULT_MAX_BATCH="64")
    job = jobs(JOB, faults.env(), args=[td, THREADS]).wait(180)
    result = job.result
    assert len(result["kills"]) == 2 and result["restarted"] not in result["kills"]
    steps = result["steps"]
    want = sum(
        (once([f"t{i}/m{k}" for k in range(4)], range(steps[i])) for i in range(THREADS)), Counter()
    )
    before = faults.metrics()
    assert not (before - want), f"a value delivered twice as different records: {before - want}"
    assert sum(before.values()) < sum(want.values()), (
        "the tracker went down too late to leave work for sync"
    )
    summary = result["summary"]
    assert summary["logged"] == 4 * sum(steps)
    assert summary["journal"], summary["describe"]

    faults.come_back()
    done = sync(td, faults.env(FAULT_SLOW="0"))
    assert done.returncode == 0, done.stderr[-4000:]
    got = faults.metrics()
    assert got == want, missing_and_extra(got, want)
    closes = faults.events("close")
    assert [c["status"] for c in closes] == ["FINISHED"], closes
    assert journal_files(td) == []
