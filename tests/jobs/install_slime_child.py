"""A child process of slime's driver (tests/slime/test_install.py,
test_a_child_process_of_the_driver_uses_the_drop_ins): slime's rollout manager logs 3 steps;
prints, as JSON, whether slime's init_tracking is the adapter's, the stand-in's record of its
original calls and the sitecustomize that ran.

Usage: python install_slime_child.py
"""

from __future__ import annotations

import argparse
import json
import sys

from slime.observability import logging_utils
from slime.ray.rollout import RolloutManager

from slime_integration import tracking

patched = logging_utils.init_tracking is tracking.init_tracking
manager = RolloutManager(argparse.Namespace(lr=1e-6, megatron_config_path=None))
for step in range(3):
    manager.log_rollout(step, {"rollout/raw_reward": float(step)})
manager.dispose()
print(json.dumps({"patched": patched, "original_calls": logging_utils.ORIGINAL_CALLS,
                  "sitecustomize": sys.modules["sitecustomize"].__file__}))
