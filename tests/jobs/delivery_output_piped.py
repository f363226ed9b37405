"""300 values to ``steady`` and ``faulty`` and one that ``faulty`` refuses, then the delivery
process is stopped (SIGSTOP) before ``finish(timeout=1)`` (tests/faults/test_delivery_output.py:
a pipe from training closes when training ends). Prints ``DELIVERY pid``, then the run id and
the run's label.

Usage: python delivery_output_piped.py TRACKING_DIR
"""

from __future__ import annotations

import os
import signal
import sys

from fault_prelude import delivery_pid, report

import tracking_core

run = tracking_core.start_run(backends=["steady", "faulty"], tracking_dir=sys.argv[1])
for step in range(300):
    run.log_metrics({"x": float(step)}, step=step)
run.log_metrics({"refused": 1.0}, step=0)  # faulty refuses it: a warning from the delivery process
run.flush(30)
pid = delivery_pid(run)
print(f"DELIVERY {pid}", flush=True)
os.kill(pid, signal.SIGSTOP)
run.finish(timeout=1)
report(run_id=run.run_id, label=run.label)
