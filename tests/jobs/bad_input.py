"""The worst input a training loop can hand over, logged to ``faulty`` and ``steady``
(tests/faults/test_bad_input.py, test_worst_input_never_raises_and_a_rejected_key_is_skipped_for_that_tracker_only):
what raised (nothing should), how many values a step held and the finish summary.

Usage: python bad_input.py TRACKING_DIR STEPS
"""

from __future__ import annotations

import math
import sys
from typing import Any

from fault_prelude import report, summ

# isort: split
import torch

import tracking_core

run = tracking_core.start_run(backends=["faulty", "steady"], tracking_dir=sys.argv[1])
raised: list[str] = []
batch: dict[Any, Any] = {}
for step in range(int(sys.argv[2])):
    batch = {
        "ok": float(step), "nan": math.nan, "inf": math.inf, "ninf": -math.inf,
        "huge": 10**400, "bad/key": 1.0, 1: 2.0, None: 3.0, (1, 2): 4.0,
        "text": "abc", "t_scalar": torch.tensor(1.5), "t_vec": torch.ones(3),
    }  # fmt: skip
    try:
        run.log_metrics(batch, step=step)
    except BaseException as exc:
        raised.append(repr(exc))
summary: Any
try:
    summary = run.finish(timeout=20)
except BaseException as exc:
    raised.append(repr(exc))
    summary = None
report(raised=raised, per_step=len(batch), summary=summ(summary))
