"""A script whose run logs 3 steps to jsonl (tests/core/test_report.py): what it says on stderr
when it starts and ends. With ``--tracking-dir configured`` it configures logging itself first.

Usage: python report_start.py TRACKING_DIR [TRACKING_OPTION...]
"""

from __future__ import annotations

import argparse
import logging
import sys

import tracking_core

parser = argparse.ArgumentParser()
tracking_core.add_tracking_options(parser)
args = parser.parse_args(sys.argv[2:])
if args.tracking_dir == "configured":  # an application that configured logging itself
    logging.basicConfig(level=logging.WARNING, format="APP %(name)s: %(message)s")
run = tracking_core.start_run(args=args, backends=["jsonl"], tracking_dir=sys.argv[1])
for step in range(3):
    run.log_metrics({"loss": 1.0, "acc": 0.5}, step=step)
run.finish()
