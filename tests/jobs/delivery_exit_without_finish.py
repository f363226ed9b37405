"""A run and an actor writer that log and never finish: the interpreter exits normally
(tests/core/test_delivery.py, test_exit_without_finish_still_delivers). Prints the run id.

Usage: python delivery_exit_without_finish.py TRACKING_DIR
"""

from __future__ import annotations

import sys

import tracking_core

run = tracking_core.start_run(backends=["jsonl"], tracking_dir=sys.argv[1], config={"a": 1})
child = tracking_core.attach(role="actor", writer=True, collect=False)
for step in range(500):
    child.log_metrics({"loss": step * 0.5, "kl": 0.1}, step=step, step_key="train/step")
print(run.run_id)
# no finish(): the interpreter exits normally
