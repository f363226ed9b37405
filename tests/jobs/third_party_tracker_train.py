"""A training script whose run goes to the tracker chosen by its options
(tests/cli/test_third_party_tracker.py,
test_a_template_tracker_gets_start_and_end_lines_ui_and_show): a run and an actor logging 3
steps; prints the run id.

Usage: python third_party_tracker_train.py [TRACKING_OPTION...]
"""

from __future__ import annotations

import argparse
import sys

import tracking_core

parser = argparse.ArgumentParser()
tracking_core.add_tracking_options(parser)
args = parser.parse_args(sys.argv[1:])
run = tracking_core.start_run(args=args, config={"lr": 1e-6})
actor = tracking_core.attach(role="actor", config={"lr": 2e-6}, collect=False)
for step in range(3):
    actor.log_metrics({"train/loss": 1.0 / (step + 1)}, step=step, step_key="train/step")
actor.finish()
run.finish()
print(run.handle.run_id)
