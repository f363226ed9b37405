"""A writer of role ROLE (critic, or rollout naming its metrics itself) in the job of
tests/jobs/wandb_driver.py: logs ``$TEST_STEPS`` steps with its config from ``$TEST_CONFIGS``
and fails if W&B failed (tests/backends/test_wandb.py).

Usage: python wandb_child.py critic|rollout --wandb-key KEY
"""

from __future__ import annotations

import json
import os
import sys

import tracking_core

role = sys.argv[1]
cfg = json.loads(os.environ["TEST_CONFIGS"])
steps = int(os.environ["TEST_STEPS"])
if role == "critic":
    run = tracking_core.attach(role="critic", writer=True, collect=False, config=cfg["critic"])
    for step in range(steps):
        run.log_metrics({"train/value_loss": 0.5 / (step + 1)}, step=step, step_key="train/step")
else:  # slime's rollout manager names its metrics itself
    run = tracking_core.attach(
        role="rollout", writer=True, collect=False, metric_prefix="", config=cfg["rollout"]
    )
    for step in range(steps):
        run.log_metrics(
            {"rollout/raw_reward": 0.1 * step, "rollout/step": step},
            step=step,
            step_key="rollout/step",
        )
summary = run.finish()
assert summary is not None  # a writer's summary
assert not summary.backends["wandb"]["failures"], summary
