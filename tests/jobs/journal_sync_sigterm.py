"""A run on the jsonl backend that logs 100 steps, prints its id and sends itself SIGTERM
(tests/core/test_journal_sync.py, test_sigterm_finishes_the_run_killed).

Usage: python journal_sync_sigterm.py TRACKING_DIR
"""

from __future__ import annotations

import os
import signal
import sys

import tracking_core

run = tracking_core.start_run(backends=["jsonl"], tracking_dir=sys.argv[1])
for step in range(100):
    run.log_metrics({"x": step}, step=step)
print(run.run_id, flush=True)
os.kill(os.getpid(), signal.SIGTERM)
