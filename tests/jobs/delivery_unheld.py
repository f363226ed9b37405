"""A run whose actor writer nobody holds, as slime's actors do (tests/core/test_delivery.py,
test_a_run_nobody_holds_is_still_delivered_at_exit): prints the run id.

Usage: python delivery_unheld.py TRACKING_DIR
"""

from __future__ import annotations

import gc
import sys

import tracking_core

run = tracking_core.start_run(backends=["jsonl"], tracking_dir=sys.argv[1])


def train() -> None:  # the caller keeps no reference to its run, as slime's actors do
    child = tracking_core.attach(role="actor", writer=True, collect=False)
    for step in range(50):
        child.log_metrics({"loss": float(step)}, step=step)


train()
gc.collect()
print(run.run_id)
