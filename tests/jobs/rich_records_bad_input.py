"""Bad input to log_table, log_histogram, log_text and log_artifact, and the rich calls of a
NullRun (tests/faults/test_rich_records.py: bad input to the rich kinds never raises). Prints
what raised (nothing should) and the finish summary.

Usage: python rich_records_bad_input.py TRACKING_DIR
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["steady"], tracking_dir=sys.argv[1])
raised: list[str] = []
calls: list[Callable[[], None]] = [
    lambda: run.log_table("t", {"not": "rows"}),
    lambda: run.log_table("t", [1, 2, 3]),
    lambda: run.log_table("t", None),
    lambda: run.log_histogram("h", ["a", "b"]),
    lambda: run.log_histogram("h", []),
    lambda: run.log_histogram("h", 5),
    lambda: run.log_histogram("h", [float("nan"), 1.0, float("inf"), 2.0], step="x"),  # type: ignore[arg-type]
    lambda: run.log_text("x", object()),  # type: ignore[arg-type]
    lambda: run.log_artifact("/does/not/exist"),
    lambda: run.log_table("ok", [{"a": 1}], step=1.0),  # type: ignore[arg-type]
]
for call in calls:
    try:
        call()
    except BaseException as exc:
        raised.append(repr(exc))
summary = run.finish(timeout=20)
null = tracking_core.runs.NullRun(None, "actor")
null.log_table("t", [])
null.log_histogram("h", [])
null.log_text("x", "")
null.log_artifact("p")
report(raised=raised, summary=summ(summary))
