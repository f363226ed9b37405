"""500 values to ``faulty`` and ``hang`` (a tracker whose log_metrics never returns), then
``finish(timeout=3)`` (tests/faults/test_recovery.py: sync with a tracker that never returns).
Prints the finish summary.

Usage: python recovery_hang.py TRACKING_DIR
"""

from __future__ import annotations

import sys

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["faulty", "hang"], tracking_dir=sys.argv[1])
for step in range(500):
    run.log_metrics({"x": float(step)}, step=step)
summary = run.finish(timeout=3)
report(summary=summ(summary))
