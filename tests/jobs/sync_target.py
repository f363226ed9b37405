"""Logs 50 steps to the MLflow server of ``$MLFLOW_TRACKING_URI`` and finishes within 5 seconds
(tests/faults/test_sync_target.py): the run id, how long start_run and finish took and the finish
summary.

Usage: python sync_target.py TRACKING_DIR
"""

from __future__ import annotations

import sys
import time

from fault_prelude import report, summ

import tracking_core

t0 = time.monotonic()
run = tracking_core.start_run(backends=["mlflow"], tracking_dir=sys.argv[1], config={"lr": 0.1})
start_took = time.monotonic() - t0
for step in range(50):
    run.log_metrics({"loss": step / 10, "reward": float(step)}, step=step, step_key="train/step")
    time.sleep(0.02)
t0 = time.monotonic()
summary = run.finish(timeout=5)
report(
    run_id=run.run_id,
    start_took=start_took,
    finish_took=time.monotonic() - t0,
    summary=summ(summary),
)
