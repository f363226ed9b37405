"""Logs 1,500 steps to MLflow and ``steady``, reports the run id, prints ``LOGGED`` and sleeps
to be killed before its pump meets the deletion (tests/faults/test_deleted_tracking_dir.py,
test_deleted_then_killed_at_once_the_delivery_process_finishes).

Usage: python deleted_tracking_dir_orphan.py MLFLOW_URI TRACKING_DIR
"""

from __future__ import annotations

import sys
import time

from fault_prelude import report

import tracking_core

run = tracking_core.start_run(
    backends=["mlflow", "steady"],
    tracking_dir=sys.argv[2],
    options={"mlflow_tracking_uri": sys.argv[1]},
)
for step in range(1000):
    run.log_metrics({"loss": step / 10}, step=step)
run.flush(60)  # both trackers have the run open
for step in range(1000, 1500):
    run.log_metrics({"loss": step / 10}, step=step)
time.sleep(1.0)  # journaled
report(run_id=run.run_id)
print("LOGGED", flush=True)
time.sleep(120)  # killed here, before its pump meets the deletion
