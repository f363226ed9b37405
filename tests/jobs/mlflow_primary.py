"""A job named JOB logging one step to the embedded MLflow store of TRACKING_DIR; fails unless
it drained without a failure, and prints its MLflow handle entry as JSON
(tests/backends/test_mlflow.py, test_jobs_creating_one_embedded_store_at_once).

Usage: python mlflow_primary.py JOB TRACKING_DIR
"""

from __future__ import annotations

import json
import sys

import tracking_core

job, tracking_dir = sys.argv[1], sys.argv[2]
run = tracking_core.start_run(
    {"job": job}, backends=["mlflow"], tracking_dir=tracking_dir, name=job
)
run.log_metrics({"x": 1.0}, step=0)
summary = run.finish(60)
assert summary.drained and not summary.backends["mlflow"]["failures"], summary.describe()
print(json.dumps(run.handle.backends["mlflow"]))
