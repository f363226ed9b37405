"""3000 values to jsonl and ``crashy`` (a tracker that aborts its process), pausing 0.05 s every
100 (tests/faults/test_recovery.py: a tracker that aborts its process costs no other tracker a
value). Prints the finish summary.

Usage: python recovery_crash.py TRACKING_DIR
"""

from __future__ import annotations

import sys
import time

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["jsonl", "crashy"], tracking_dir=sys.argv[1])
for step in range(3000):
    run.log_metrics({"x": float(step)}, step=step)
    if step % 100 == 99:
        time.sleep(0.05)
summary = run.finish(timeout=60)
report(summary=summ(summary))
