"""A worker of report_driver.py (tests/core/test_report.py): attaches as a writer of ROLE and
logs STEPS steps of KEYS metrics.

Usage: python report_worker.py ROLE STEPS KEYS
"""

from __future__ import annotations

import sys

import tracking_core

role, steps, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
writer = tracking_core.attach(role=role, writer=True, collect=False)
for step in range(steps):
    writer.log_metrics({f"m{k}": float(step) for k in range(keys)}, step=step)
writer.finish(timeout=60)
