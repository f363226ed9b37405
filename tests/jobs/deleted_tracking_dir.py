"""Logs STEPS steps to MLflow, jsonl and ``steady``; prints ``DELIVERY <pid>``, then ``HALF`` at
step 700 (the test deletes the tracking directory then); in mode ``kill`` prints ``LOGGED`` at
step 1200 and sleeps to be killed, else finishes and reports the run id, the finish summary and
the journal (tests/faults/test_deleted_tracking_dir.py, test_the_tracking_dir_deleted_mid_run
and test_deleted_then_killed_sync_delivers_the_rest).

Usage: python deleted_tracking_dir.py MLFLOW_URI TRACKING_DIR finish|kill STEPS
"""

from __future__ import annotations

import sys
import time

from fault_prelude import delivery_pid, report, summ

import tracking_core

uri, td, mode, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
run = tracking_core.start_run(
    backends=["mlflow", "jsonl", "steady"],
    tracking_dir=td,
    config={"lr": 0.1},
    options={"mlflow_tracking_uri": uri},
)
print(f"DELIVERY {delivery_pid(run)}", flush=True)
for step in range(steps):
    run.log_metrics({"loss": step / 10}, step=step, step_key="train/step")
    if step == 700:
        print("HALF", flush=True)  # the test deletes the tracking directory now; logging goes on
    if mode == "kill" and step == 1200:
        print("LOGGED", flush=True)
        time.sleep(120)  # killed here
    time.sleep(0.002)
summary = run.finish(timeout=20)
report(run_id=run.run_id, summary=summ(summary), journal=str(run.journal))
