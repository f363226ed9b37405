"""Metrics to jsonl and MLflow without end, a flush at step 1500 (tests/faults/test_recovery.py:
three syncs right after a kill wait for the finishing delivery process). Prints ``RUN id``,
``DELIVERY pid`` and ``FLUSHED 1500``; the test kills it.

Usage: python recovery_killed.py TRACKING_DIR MLFLOW_TRACKING_URI
"""

from __future__ import annotations

import sys
import time

from fault_prelude import delivery_pid

import tracking_core

run = tracking_core.start_run(backends=["jsonl", "mlflow"], tracking_dir=sys.argv[1],
                              options={"mlflow_tracking_uri": sys.argv[2]})
print("RUN", run.run_id, flush=True)
print("DELIVERY", delivery_pid(run), flush=True)
step = 0
while True:
    run.log_metrics({"loss": step / 10, "reward": float(step)}, step=step)
    step += 1
    if step == 1500:
        run.flush(60)
        print("FLUSHED", step, flush=True)
    time.sleep(0.0005)
