"""THREADS threads logging lazy mappings concurrently to ``faulty`` while the delivery process is
SIGKILLed twice, then the tracker goes down (``$FAULT_DOWN_FILE``) before ``finish(timeout=5)``
(tests/faults/test_threads_restart_sync.py). Prints the killed pids, the delivery process that
runs at the end, each thread's step count and the finish summary.

Usage: python threads_restart_sync.py TRACKING_DIR THREADS
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping

from fault_prelude import delivery_pid, report, summ

sys.setswitchinterval(1e-5)  # preempt threads as often as the interpreter can
import tracking_core  # noqa: E402 - after the switch interval is set


class LazyStats(Mapping[str, float]):
    # metrics computed when read

    def __init__(self, i: int, step: int) -> None:
        self.step = step
        self.names = [f"t{i}/m{k}" for k in range(4)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, name: str) -> float:
        return sum(range(3000 + self.step % 7)) / 1e6 + int(name[-1])


def delivered_bytes() -> int:
    try:
        return os.path.getsize(os.environ["FAULT_OUT"])
    except OSError:
        return 0


def wait_for_delivery(grow: int, timeout: float = 60) -> None:
    # until the tracker has received about grow / 120 more values
    start = delivered_bytes()
    deadline = time.monotonic() + timeout
    while delivered_bytes() < start + grow:
        assert time.monotonic() < deadline, "no delivery"
        time.sleep(0.02)


THREADS = int(sys.argv[2])
run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1])
go, stop = threading.Event(), threading.Event()
steps = [0] * THREADS


def worker(i: int) -> None:
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
    os.kill(pid, signal.SIGKILL)
    kills.append(pid)
    pid = delivery_pid(run, not_pid=pid)  # started again
wait_for_delivery(100_000)
stop.set()
for t in threads:
    t.join()
open(os.environ["FAULT_DOWN_FILE"], "w").close()  # the tracker goes down: the rest is for sync
summary = run.finish(timeout=5)
report(kills=kills, restarted=pid, steps=steps, summary=summ(summary))
