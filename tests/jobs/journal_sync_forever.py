"""A run on the gated backend that logs until it is killed, printing the step and the time every
50 steps (tests/core/test_journal_sync.py, test_sigkill_loses_at_most_the_last_flush_interval).

Usage: python journal_sync_forever.py TRACKING_DIR
"""

from __future__ import annotations

import sys
import time

import tracking_core

run = tracking_core.start_run(backends=["gated"], tracking_dir=sys.argv[1])
step = 0
while True:
    run.log_metrics({"x": float(step)}, step=step)
    if step % 50 == 0:
        print(step, time.time(), flush=True)
    step += 1
    time.sleep(0.001)
