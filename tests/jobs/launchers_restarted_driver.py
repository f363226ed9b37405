"""A driver that starts the job's run (its id from the launcher's variables) on MLflow at URI
and jsonl, logs the steps FIRST and FIRST + 1 and finishes: prints the run id
(tests/core/test_launchers.py, test_a_restarted_driver_continues_the_jobs_run).

Usage: python launchers_restarted_driver.py URI FIRST
"""

from __future__ import annotations

import sys

import tracking_core

run = tracking_core.start_run(backends=["mlflow", "jsonl"], config={"lr": 0.1},
                              options={"mlflow_tracking_uri": sys.argv[1], "mlflow_experiment": "restarts"})
first = int(sys.argv[2])
for step in range(first, first + 2):
    run.log_metrics({"loss": float(step)}, step=step)
run.finish(timeout=60)
print(run.run_id)
