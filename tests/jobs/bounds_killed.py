"""5000 values to ``faulty``, then ``finish(timeout=30)`` while a thread SIGKILLs the delivery
process 0.7 s in (tests/faults/test_bounds.py: a delivery process killed during finish is
restarted). Prints how long finish took, the killed pid and the finish summary.

Usage: python bounds_killed.py TRACKING_DIR
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from fault_prelude import delivery_pid, report, summ

import tracking_core

run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1])
for step in range(5000):
    run.log_metrics({"x": float(step)}, step=step)
pid = delivery_pid(run)


def kill_soon() -> None:
    time.sleep(0.7)
    os.kill(pid, signal.SIGKILL)


threading.Thread(target=kill_soon).start()
t0 = time.monotonic()
summary = run.finish(timeout=30)
report(took=time.monotonic() - t0, killed=pid, summary=summ(summary))
