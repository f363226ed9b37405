"""A run whose delivery process is killed (SIGKILL) KILLS times, once every 100 steps
(tests/core/test_delivery_process.py, test_a_killed_delivery_process_is_started_again_and_resumes
and test_a_delivery_process_that_keeps_dying_leaves_the_rest_to_sync): prints the finish
summary.

Usage: python delivery_process_kill_helpers.py TRACKING_DIR KILLS
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import tracking_core


def helper() -> int:
    lines = [json.loads(line) for line in open(os.environ["PROBE_OUT"])]
    pids: list[int] = [c.get("open") or c.get("attach") for c in lines if "open" in c or "attach" in c]
    return pids[-1]


kills = int(sys.argv[2])
run = tracking_core.start_run(backends=["probe"], tracking_dir=sys.argv[1])
for step in range(400):
    run.log_metrics({"x": float(step)}, step=step)
    if step % 100 == 50 and step // 100 < kills:
        run.flush(30)
        killed = helper()
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while step // 100 < 3 and helper() == killed and time.monotonic() < deadline:
            time.sleep(0.05)  # the next one attaches
    time.sleep(0.002)
print(run.finish(timeout=10).describe())
