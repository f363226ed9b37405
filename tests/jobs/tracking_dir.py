"""Logs 100 steps to an MLflow server with ``$TRACKING_CORE_DIR`` unusable
(tests/faults/test_tracking_dir.py): the run id, the finish summary and what raised (nothing
should).

Usage: python tracking_dir.py MLFLOW_URI
"""

from __future__ import annotations

import sys

from fault_prelude import report, summ

import tracking_core

raised: list[str] = []
try:
    run = tracking_core.start_run(
        backends=["mlflow"], config={"lr": 0.1}, options={"mlflow_tracking_uri": sys.argv[1]}
    )
    for step in range(100):
        run.log_metrics({"loss": step / 10}, step=step, step_key="train/step")
    summary = run.finish(timeout=30)
    report(run_id=run.run_id, summary=summ(summary), raised=raised)
except BaseException as exc:
    report(raised=[repr(exc)])
    raise
