"""A run on the gated and jsonl backends with an actor writer logging STEPS steps
(tests/core/test_journal_sync.py): prints the run id. Without DOWN it ends without finishing (the
exit finishes it). With DOWN (the gated tracker's outage marker) the tracker goes down at step
100 and comes back at step 400 once a call has met the outage, each step sleeps 6 ms, and the
writer and the run are finished.

Usage: python journal_sync_gated_run.py TRACKING_DIR STEPS [DOWN]
"""

from __future__ import annotations

import os
import sys
import time

import tracking_core

steps = int(sys.argv[2])
down = sys.argv[3] if len(sys.argv) > 3 else None


def wait_until_seen(down: str) -> None:
    deadline = time.monotonic() + 60
    while not os.path.exists(down + ".seen") and time.monotonic() < deadline:
        time.sleep(0.05)


run = tracking_core.start_run(backends=["gated", "jsonl"], tracking_dir=sys.argv[1],
                              config={"lr": 0.1})
child = tracking_core.attach(role="actor", writer=True, collect=False, config={"lr": 0.2})
for step in range(steps):
    child.log_metrics({"loss": step / 10, "reward": step}, step=step, step_key="train/step")
    if down is not None:
        if step == 100:
            open(down, "w").close()
        if step == 400:
            wait_until_seen(down)  # the tracker comes back only once a call has met the outage
            os.unlink(down)
        time.sleep(0.006)
print(run.run_id, flush=True)
if down is not None:
    child.finish()
    run.finish()
