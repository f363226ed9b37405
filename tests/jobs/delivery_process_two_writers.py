"""A primary and an actor writer log through the probe and tensorboard backends
(tests/core/test_delivery_process.py, test_trackers_run_in_a_delivery_process): prints this
process's pid, what the probe delivered and whether the run drained, then the tensorboardX
modules this process imported.

Usage: python delivery_process_two_writers.py TRACKING_DIR
"""

from __future__ import annotations

import os
import sys

import tracking_core

run = tracking_core.start_run(backends=["probe", "tensorboard"], tracking_dir=sys.argv[1])
child = tracking_core.attach(role="actor", writer=True, collect=False)
for step in range(200):
    child.log_metrics({"loss": step / 10}, step=step, step_key="train/step")
child.finish()
summary = run.finish()
print(os.getpid(), summary.backends["probe"]["delivered"], summary.drained)
print(sorted(m for m in sys.modules if m.split(".")[0] == "tensorboardX"))
