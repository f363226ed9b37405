"""A run that logs until it is killed, saying "ready" at step 300
(tests/core/test_delivery_process.py,
test_sigterm_to_the_process_group_does_not_cut_delivery_short).

Usage: python delivery_process_until_killed.py TRACKING_DIR
"""

from __future__ import annotations

import sys
import time

import tracking_core

run = tracking_core.start_run(backends=["probe"], tracking_dir=sys.argv[1])
step = 0
while True:
    run.log_metrics({"x": float(step)}, step=step)
    if step == 300:
        print("ready", flush=True)
    step += 1
    time.sleep(0.001)
