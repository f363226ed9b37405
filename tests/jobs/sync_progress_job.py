"""A run on the MLflow server at URI that logs STEPS steps of KEYS metrics and finishes within
3 s (tests/cli/test_sync_progress.py): prints START, END (of logging) and FINISHED, each with
the time.

Usage: python sync_progress_job.py TRACKING_DIR URI STEPS KEYS
"""

from __future__ import annotations

import sys
import time

import tracking_core

td, uri, steps, keys = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
print("START", time.time(), flush=True)
run = tracking_core.start_run(backends=["mlflow"], tracking_dir=td, options={"mlflow_tracking_uri": uri})
for step in range(steps):
    run.log_metrics({f"k{i}": float(step) for i in range(keys)}, step=step)
print("END", time.time(), flush=True)
run.finish(timeout=3)
print("FINISHED", time.time(), flush=True)
