"""A ``critic`` writer on a simulated node (tests/faults/test_writer_registry.py): attaches to
``$TRACKING_CORE_RUN``, logs step 0, flushes and prints ``flushed <label>``, waits for GO_FILE,
logs steps 1-3; in mode ``finish`` finishes and prints ``finished <drained>``, else prints
``logged`` once they are journaled and sleeps to be killed.

Usage: python writer_registry_node.py GO_FILE finish|die
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import tracking_core

go, mode = Path(sys.argv[1]), sys.argv[2]
run = tracking_core.attach(role="critic", writer=True, collect=False)
assert isinstance(run, tracking_core.Run)  # a writer
run.log_metrics({"loss": 0.0}, step=0, step_key="train/step")
assert run.flush(timeout=60)
print("flushed", run.label, flush=True)
while not go.exists():
    time.sleep(0.05)
for step in (1, 2, 3):
    run.log_metrics({"loss": float(step)}, step=step, step_key="train/step")
if mode == "finish":
    summary = run.finish(timeout=60)
    assert summary is not None
    print("finished", summary.drained, flush=True)
else:
    time.sleep(1.5)  # journaled: the pump writes within its flush interval (0.5 s)
    print("logged", flush=True)
    time.sleep(600)
