"""The job's driver: a run that logs one step and finishes (tests/cli/test_sync_exit.py):
prints DONE, the run id and whether it drained.

Usage: python sync_exit_primary.py
"""

from __future__ import annotations

import tracking_core

run = tracking_core.start_run(config={"lr": 0.5})
run.log_metrics({"loss": 0.5}, step=0, step_key="train/step")
summary = run.finish(timeout=60)
print("DONE", run.run_id, summary.drained, flush=True)
