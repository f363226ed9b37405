"""Logs 100 steps from the primary and an ``actor`` writer, both finishing cleanly
(tests/faults/test_journal_disk.py, test_nothing_is_left_in_the_journal_after_a_clean_finish):
both finish summaries.

Usage: python journal_disk.py TRACKING_DIR
"""

from __future__ import annotations

import sys

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(
    backends=["faulty", "steady"], tracking_dir=sys.argv[1], config={"lr": 0.1}
)
actor = tracking_core.attach(role="actor", writer=True, collect=False, config={"lr": 0.2})
for step in range(100):
    run.log_metrics({"x": float(step)}, step=step)
    actor.log_metrics({"loss": step / 10}, step=step)
secondary = actor.finish(timeout=20)
primary = run.finish(timeout=20)
report(secondary=summ(secondary), primary=summ(primary))
