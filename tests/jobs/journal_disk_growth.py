"""Prints ``STARTED`` and logs 20 long-named metrics a step flat out for 8 seconds
(tests/faults/test_journal_disk.py, test_the_journal_stays_bounded_while_a_long_run_goes_on):
the steps logged and the finish summary.

Usage: python journal_disk_growth.py TRACKING_DIR
"""

from __future__ import annotations

import sys
import time

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1])
names = [f"train/a_rather_long_metric_name_{k:02d}" for k in range(20)]
print("STARTED", flush=True)
t0 = time.monotonic()
step = 0
while time.monotonic() - t0 < 8:
    run.log_metrics({name: step + k / 100 for k, name in enumerate(names)}, step=step)
    step += 1
    time.sleep(0.001)
summary = run.finish(timeout=30)
report(steps=step, summary=summ(summary))
