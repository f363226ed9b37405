"""Tables of a key the fault backend refuses beside good tables and metrics
(tests/faults/test_rich_records.py: a table one tracker refuses is skipped for it only).

Usage: python rich_records_refused.py TRACKING_DIR
"""

from __future__ import annotations

import sys

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["faulty", "steady"], tracking_dir=sys.argv[1])
for step in range(5):
    run.log_table("bad", [{"x": step}], step=step)
    run.log_table("good", [{"x": step}], step=step)
    run.log_metrics({"loss": step}, step=step)
summary = run.finish(timeout=20)
report(summary=summ(summary))
