"""The primary of a job whose run id comes from the launcher's variables
(tests/core/test_node_dirs.py,
test_without_a_handle_the_job_id_finds_the_run_from_another_host): logs 2 steps, prints
STARTED and its run id, and finishes once the file RELEASE exists (2 minutes at most).

Usage: python node_dirs_primary.py RELEASE
"""

from __future__ import annotations

import os
import sys
import time

import tracking_core

run = tracking_core.start_run(config={"lr": 0.5})
for step in range(2):
    run.log_metrics({"loss": 0.5 - step / 10}, step=step, step_key="train/step")
run.flush(timeout=60)
print("STARTED " + run.run_id, flush=True)
deadline = time.time() + 120
while not os.path.exists(sys.argv[1]) and time.time() < deadline:
    time.sleep(0.1)
run.finish(timeout=60)
