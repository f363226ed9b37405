"""Logs the empty key beside a good one to W&B offline for 201 steps
(tests/faults/test_bad_input.py, test_an_empty_key_does_not_stop_wandb): the run id and the
finish summary.

Usage: python bad_input_wandb.py TRACKING_DIR
"""

from __future__ import annotations

import sys

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["wandb"], tracking_dir=sys.argv[1])
for step in range(201):
    run.log_metrics({"": 1.0, "x": float(step)}, step=step, step_key="train/step")
summary = run.finish(timeout=60)
report(run_id=run.run_id, summary=summ(summary))
