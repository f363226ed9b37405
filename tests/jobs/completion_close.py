"""Logs 50 steps to ``faulty`` and ``steady`` and finishes within 5 seconds
(tests/faults/test_completion.py, test_a_close_that_always_fails_keeps_the_journal_and_sync_retries_it):
how long finish took and its summary.

Usage: python completion_close.py TRACKING_DIR
"""

from __future__ import annotations

import sys
import time

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(
    backends=["faulty", "steady"], tracking_dir=sys.argv[1], config={"lr": 0.1}
)
for step in range(50):
    run.log_metrics({"loss": step / 10}, step=step)
t0 = time.monotonic()
summary = run.finish(timeout=5)
report(took=time.monotonic() - t0, summary=summ(summary))
