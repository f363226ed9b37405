"""A run on the acme and jsonl backends, chosen by command-line options, with an actor writer
(tests/core/test_plugins.py, test_hook_register_backends_third_party_dist_is_listed_and_selected).

Usage: python plugins_acme_run.py TRACKING_DIR
"""

from __future__ import annotations

import argparse
import sys

import tracking_core

parser = argparse.ArgumentParser()
tracking_core.add_tracking_options(parser)
args = parser.parse_args(["--tracking-backends", "acme,jsonl", "--tracking-dir", sys.argv[1]])
args.lr = 0.5
run = tracking_core.start_run(args=args)
assert run.backends == ["acme", "jsonl"], run.backends
actor = tracking_core.attach(role="actor", writer=True)
for step in range(3):
    actor.log_metrics({"loss": 1.0 / (step + 1), "reward": step}, step=step, step_key="train/step")
actor.finish()
run.finish()
