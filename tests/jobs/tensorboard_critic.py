"""A ``critic`` writer attached to ``$TRACKING_CORE_RUN`` logs its config (JSON in
``$CRITIC_CONFIG``) and seven steps to TensorBoard (tests/backends/test_tensorboard.py): prints
its section's session hparams, its config text and the values delivered as JSON.

Usage: python tensorboard_critic.py
"""

from __future__ import annotations

import json
import os

from tracking_tensorboardx.hparams import session_hparams

import tracking_core
from tracking_core.config import config_text

critic = tracking_core.attach(role="critic", writer=True, collect=False)
section = critic.log_config(json.loads(os.environ["CRITIC_CONFIG"]))
assert section is not None  # a writer's section
for step in range(7):
    critic.log_metrics(
        {"train/critic-value_loss": 1.0 / (step + 3)}, step=step, step_key="train/step"
    )
summary = critic.finish()
assert summary is not None  # a writer's summary
print(
    json.dumps(
        {
            "hparams": session_hparams(section)[0],
            "text": config_text(section),
            "delivered": summary.backends["tensorboard"]["delivered"],
        }
    )
)
