"""A run on the failing and jsonl backends (tests/core/test_delivery.py,
test_a_failing_backend_never_reaches_the_caller_or_the_others): prints the run id and the finish
summary.

Usage: python delivery_failing_run.py TRACKING_DIR
"""

from __future__ import annotations

import sys

import tracking_core

run = tracking_core.start_run(backends=["failing", "jsonl"], tracking_dir=sys.argv[1])
for step in range(200):
    run.log_metrics({"loss": float(step)}, step=step)
summary = run.finish(timeout=3)
print(run.run_id)
print(summary.describe())
