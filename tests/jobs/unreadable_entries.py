"""Logs 20 steps and finishes within 2 seconds (tests/faults/test_unreadable_entries.py): the
finish summary.

Usage: python unreadable_entries.py TRACKING_DIR
"""

from __future__ import annotations

import sys

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1])
for step in range(20):
    run.log_metrics({"x": float(step)}, step=step)
report(summary=summ(run.finish(timeout=2)))
