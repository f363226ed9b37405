"""A second writer of names_mlflow.py's run (tests/faults/test_names.py): logs the same keys,
unprefixed, at steps 5 to 9, and prints whether its finish drained (``true``).

Usage: python names_mlflow_late.py KEYS_JSON   (with $TRACKING_CORE_RUN of the run)
"""

from __future__ import annotations

import json
import sys

import tracking_core

keys = json.loads(sys.argv[1])
w = tracking_core.attach(role="late", writer=True, collect=False, metric_prefix="")
for step in range(5, 10):
    w.log_metrics({k: i * 100 + step for i, k in enumerate(keys)}, step=step)
summary = w.finish(timeout=60)
assert summary is not None  # a writer's finish has a summary
print(json.dumps(summary.drained))
