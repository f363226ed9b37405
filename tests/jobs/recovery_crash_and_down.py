"""3000 values to ``faulty`` (down) and ``crashy`` (aborts at its first call), then
``finish(timeout=10)`` (tests/faults/test_recovery.py: sync delivers every tracker in a process of
its own). Prints the finish summary.

Usage: python recovery_crash_and_down.py TRACKING_DIR
"""

from __future__ import annotations

import sys

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["faulty", "crashy"], tracking_dir=sys.argv[1])
for step in range(3000):
    run.log_metrics({"x": float(step)}, step=step)
summary = run.finish(timeout=10)
report(summary=summ(summary))
