"""RUNS runs of 300 values to ``steady``, each delivery process stopped (SIGSTOP) once the data is
delivered, then every run finished with a 1 s timeout (tests/faults/test_delivery_output.py:
stopped then continued after training exited; run under delivery_output_harness.py). Prints a
``DELIVERY pid`` line per run, then each finish summary.

Usage: python delivery_output_stopped.py TRACKING_DIR RUNS
"""

from __future__ import annotations

import os
import signal
import sys

from fault_prelude import delivery_pid, report, summ

import tracking_core

runs = []
for _ in range(int(sys.argv[2])):
    run = tracking_core.start_run(backends=["steady"], tracking_dir=sys.argv[1])
    for step in range(300):
        run.log_metrics({"x": float(step)}, step=step)
    run.flush(30)  # the data is complete; only the close is left
    pid = delivery_pid(run)
    print(f"DELIVERY {pid}", flush=True)
    os.kill(pid, signal.SIGSTOP)
    runs.append(run)
for run in runs:
    report(summary=summ(run.finish(timeout=1)))
