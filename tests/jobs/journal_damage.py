"""Logs 100 steps, flushes, prints ``READY`` and waits for a line on stdin (the test damages the
journal meanwhile), logs 100 more and finishes (tests/faults/test_journal_damage.py): the finish
summary.

Usage: python journal_damage.py TRACKING_DIR FLUSH_TIMEOUT FINISH_TIMEOUT
"""

from __future__ import annotations

import sys

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1])
for step in range(100):
    run.log_metrics({"x": float(step)}, step=step)
run.flush(float(sys.argv[2]))
print("READY", flush=True)
sys.stdin.readline()  # the test damages the journal meanwhile
for step in range(100, 200):
    run.log_metrics({"x": float(step)}, step=step)
summary = run.finish(timeout=float(sys.argv[3]))
report(summary=summ(summary))
