"""A training script using the plugin template's backend (tests/cli/test_plugin_template.py,
test_template_installs_lists_and_runs): a run and an actor logging 3 steps; prints the run id.

Usage: python plugin_template_train.py [--lr LR] [TRACKING_OPTION...]
"""

from __future__ import annotations

import argparse
import sys

import tracking_core

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-6)
tracking_core.add_tracking_options(parser)
args = parser.parse_args(sys.argv[1:])
run = tracking_core.start_run(args=args)
actor = tracking_core.attach(role="actor", config={"lr": 2e-6}, collect=False)
for step in range(3):
    actor.log_metrics({"train/loss": 1.0 / (step + 1)}, step=step, step_key="train/step")
actor.finish()
run.finish()
print(run.handle.run_id)
