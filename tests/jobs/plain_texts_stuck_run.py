"""A run on jsonl and the stuck backend (tests/core/test_plain_texts.py,
test_a_tracker_whose_constructor_aborts_or_hangs_is_named_plainly): prints the finish summary.

Usage: STUCK=abort python plain_texts_stuck_run.py TRACKING_DIR
"""

from __future__ import annotations

import sys

import tracking_core

run = tracking_core.start_run(backends=["jsonl", "stuck"], tracking_dir=sys.argv[1])
for step in range(10):
    run.log_metrics({"x": float(step)}, step=step)
print(run.finish(timeout=30).describe())
