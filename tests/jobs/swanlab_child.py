"""A writer of role ROLE in the job of tests/jobs/swanlab_driver.py: logs ``$TEST_STEPS`` steps
with its config from ``$TEST_CONFIGS`` and fails if SwanLab failed (tests/backends/test_swanlab.py).

Usage: python swanlab_child.py actor|critic
"""

from __future__ import annotations

import json
import os
import sys

import tracking_core

role = sys.argv[1]
cfg = json.loads(os.environ["TEST_CONFIGS"])
run = tracking_core.attach(role=role, writer=True, collect=False, config=cfg[role])
for step in range(int(os.environ["TEST_STEPS"])):
    run.log_metrics(
        {"train/loss": (1.0 if role == "actor" else 0.5) / (step + 1), "train/kl": 0.01 * step},
        step=step,
        step_key="train/step",
    )
summary = run.finish()
assert summary is not None  # a writer's summary
assert not summary.backends["swanlab"]["failures"], summary
