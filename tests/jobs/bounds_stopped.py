"""2000 values to ``faulty``, then the delivery process is stopped (SIGSTOP) and
``finish(timeout=5)`` timed (tests/faults/test_bounds.py: finish returns in time with a stopped
delivery process). Prints ``DELIVERY pid``, then how long finish took and its summary.

Usage: python bounds_stopped.py TRACKING_DIR
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from fault_prelude import delivery_pid, report, summ

import tracking_core

run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1])
for step in range(2000):
    run.log_metrics({"x": float(step)}, step=step)
pid = delivery_pid(run)
print(f"DELIVERY {pid}", flush=True)
run.flush(1.0)  # delivery is under way
os.kill(pid, signal.SIGSTOP)
t0 = time.monotonic()
summary = run.finish(timeout=5)
took = time.monotonic() - t0
with contextlib.suppress(ProcessLookupError):
    os.kill(pid, signal.SIGKILL)  # a stopped process ignores everything else
report(took=took, summary=summ(summary))
