"""A critic writer that logs 3 steps before the job's run is open and finishes within 2 s
(tests/cli/test_sync_exit.py): prints LEFT, its journal, and whether it drained.

Usage: python sync_exit_writer.py
"""

from __future__ import annotations

import tracking_core

run = tracking_core.attach(role="critic", config={"critic_lr": 0.25}, writer=True)
assert isinstance(run, tracking_core.Run)  # a writer
for step in range(3):
    run.log_metrics({"loss": 1.0 + step}, step=step, step_key="train/step")
summary = run.finish(timeout=2)
print("LEFT " + str(run.journal), "drained" if summary.drained else "not drained", flush=True)
