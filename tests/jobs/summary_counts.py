"""Logs five steps of three values, a table, a histogram and a text to ``faulty`` and ``steady``
and finishes within 5 seconds (tests/faults/test_summary_counts.py): the finish summary.

Usage: python summary_counts.py TRACKING_DIR
"""

from __future__ import annotations

import sys

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(
    config={"lr": 0.1}, backends=["faulty", "steady"], tracking_dir=sys.argv[1]
)
for step in range(5):
    run.log_metrics({"a": step, "b": step * 2, "c": 1.0}, step=step)
run.log_table("tab", [{"x": 1}], step=0)
run.log_histogram("h", [1.0, 2.0, 3.0], step=0)
run.log_text("t", "hello", step=0)
report(s=summ(run.finish(timeout=5)))
