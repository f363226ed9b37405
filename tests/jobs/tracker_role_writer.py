"""A writer of role ROLE in the three-process job of tests/jobs/swanlab_driver.py and
tests/jobs/trackio_driver.py (tests/backends/test_swanlab.py, test_trackio.py): logs
``$TEST_STEPS`` steps with its config from ``$TEST_CONFIGS`` and fails if its tracker failed.

Usage: python tracker_role_writer.py actor|critic
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
assert summary.backends and not any(b["failures"] for b in summary.backends.values()), summary
