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

THREADS = 8

JOB = """
import signal, sys, threading
from collections.abc import Mapping
sys.setswitchinterval(1e-5)  # preempt threads as often as the interpreter can
import tracking_core


class LazyStats(Mapping):
    # metrics computed when read

    def __init__(self, i, step):
        self.step = step
        self.names = [f"t{i}/m{k}" for k in range(4)]

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)

    def __getitem__(self, name):
        return sum(range(3000 + self.step % 7)) / 1e6 + int(name[-1])


def delivered_bytes():
    try:
        return _os.path.getsize(_os.environ["FAULT_OUT"])
    except OSError:
        return 0


def wait_for_delivery(grow, timeout=60):
    # until the tracker has received about grow / 120 more values
    start = delivered_bytes()
    deadline = _time.monotonic() + timeout
    while delivered_bytes() < start + grow:
        assert _time.monotonic() < deadline, "no delivery"
        _time.sleep(0.02)


THREADS = int(sys.argv[2])
run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1])
go, stop = threading.Event(), threading.Event()
steps = [0] * THREADS


def worker(i):
    go.wait()
    step = 0
    while not stop.is_set():
        run.log_metrics(LazyStats(i, step), step=step)
        step += 1
    steps[i] = step


threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
for t in threads:
    t.start()
pid = delivery_pid(run)
go.set()
kills = []
for _ in range(2):
    wait_for_delivery(200_000)  # the delivery process is busy delivering: kill it mid-batch
    _os.kill(pid, signal.SIGKILL)
    kills.append(pid)
    pid = delivery_pid(run, not_pid=pid)  # started again
wait_for_delivery(100_000)
stop.set()
for t in threads:
    t.join()
open(_os.environ["FAULT_DOWN_FILE"], "w").close()  # the tracker goes down: the rest is for sync
summary = run.finish(timeout=5)
report(kills=kills, restarted=pid, steps=steps, summary=summ(summary))
"""


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
