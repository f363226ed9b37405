"""Logs STEPS steps into a tracking directory on a tiny disk, removing BALLAST at step FREE_AT
(-1: never) so that the disk frees up mid-run (tests/faults/test_full_disk.py): what raised
(nothing should), the least free space seen and the finish summary.

Usage: python full_disk.py TRACKING_DIR BALLAST FREE_AT STEPS
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from fault_prelude import report, summ

import tracking_core

td, ballast, free_at, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
raised: list[str] = []
min_free = 1 << 40


def free_bytes() -> int:
    st = os.statvfs(td)
    return st.f_bavail * st.f_frsize


run = tracking_core.start_run(backends=["faulty"], tracking_dir=td, config={"lr": 0.1})
for step in range(steps):
    try:
        run.log_metrics({f"m{k}": step + k / 10 for k in range(8)}, step=step)
    except Exception as exc:
        raised.append(repr(exc))
    if step % 25 == 0:
        min_free = min(min_free, free_bytes())
    if step == free_at:
        os.remove(ballast)  # the disk frees up mid-run
    time.sleep(0.001)
summary: Any
try:
    summary = run.finish(timeout=30)
except Exception as exc:
    raised.append(repr(exc))
    summary = None
report(raised=raised, min_free=min_free, summary=summ(summary))
