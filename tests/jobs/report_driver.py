"""The demo's layout (tests/core/test_report.py): a driver that logs nothing itself starts two
worker processes (the job file WORKER: an actor, 60 steps of 3 metrics, and a critic, 30 steps of
2) that attach (the run handle in their environment) and log; its end line speaks for the job.
The run goes to the MLflow server at URI, or with URI "-" to jsonl. Prints the run id.

Usage: python report_driver.py TRACKING_DIR URI WORKER
"""

from __future__ import annotations

import subprocess
import sys

import tracking_core

td, uri, worker = sys.argv[1], sys.argv[2], sys.argv[3]
if uri == "-":
    run = tracking_core.start_run(backends=["jsonl"], tracking_dir=td)
else:
    run = tracking_core.start_run(backends=["mlflow"], tracking_dir=td, options={"mlflow_tracking_uri": uri})
procs = [subprocess.Popen([sys.executable, worker, role, str(steps), str(keys)]) for role, steps, keys in (("actor", 60, 3), ("critic", 30, 2))]
assert [p.wait(180) for p in procs] == [0, 0]
run.finish(timeout=60)
print("RUN", run.run_id, flush=True)
