"""Calls log_metrics, log_config and flush after finish, three times each
(tests/faults/test_misuse.py, test_calls_after_finish_change_nothing_and_warn_once): what raised
(nothing should), the warnings the calls gave, the saved files they changed (none should) and the
finish summary.

Usage: python misuse.py TRACKING_DIR
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from fault_prelude import WARNINGS, report, summ

import tracking_core

td = Path(sys.argv[1])


def snapshot() -> dict[str, tuple[int, str]]:
    return {
        str(p): (p.stat().st_mtime_ns, p.read_bytes().hex())
        for p in sorted(td.rglob("*"))
        if p.is_file()
    }


run = tracking_core.start_run(backends=["faulty"], tracking_dir=str(td), config={"lr": 0.1})
run.log_metrics({"x": 1.0}, step=0)
summary = run.finish(timeout=20)
before = snapshot()
seen = len(WARNINGS)
raised: list[str] = []
for i in range(3):
    try:
        run.log_metrics({"x": 2.0 + i}, step=1 + i)
        run.log_config({"lr": 0.2 + i})
        run.flush(1)
    except BaseException as exc:
        raised.append(repr(exc))
time.sleep(1.5)  # anything that would be delivered or saved has had time to be
after = snapshot()
changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
report(raised=raised, misuse_warnings=WARNINGS[seen:], changed=changed, summary=summ(summary))
