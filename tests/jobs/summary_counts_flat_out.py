"""Logs a row of 20 values flat out for SECONDS and finishes within half a second
(tests/faults/test_summary_counts.py, test_after_logging_flat_out_the_summary_and_sync_count_alike):
the finish summary.

Usage: python summary_counts_flat_out.py TRACKING_DIR SECONDS
"""

from __future__ import annotations

import sys
import time

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1], export=False)
row = {f"m{j:02d}": j * 0.5 for j in range(20)}
step, end = 0, time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    run.log_metrics(row, step=step)
    step += 1
report(s=summ(run.finish(timeout=0.5)))
