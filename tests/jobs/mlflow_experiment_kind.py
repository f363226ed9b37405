"""Logs one step to MLflow (``$MLFLOW_TRACKING_URI``, the experiment named by
``$MLFLOW_EXPERIMENT_NAME`` or ``$MLFLOW_EXPERIMENT_ID``) with the working directory as tracking
directory, and fails unless the run FINISHED (tests/backends/test_mlflow_experiment_kind.py).

Usage: python mlflow_experiment_kind.py
"""

from __future__ import annotations

import tracking_core

run = tracking_core.start_run({"lr": 0.1}, backends=["mlflow"], tracking_dir=".", name="kind")
run.log_metrics({"loss": 1.0}, step=0)
summary = run.finish(120)
assert summary is not None
assert summary.status.value == "FINISHED", summary.describe()
