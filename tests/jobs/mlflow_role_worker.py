"""A writer of role ROLE (its config's ``lr`` LR) attached to ``$TRACKING_CORE_RUN`` logs STEPS
steps to the embedded MLflow store; fails unless it drained without a failure, and prints its
finish summary (tests/backends/test_mlflow.py, test_embedded_store_with_concurrent_writers).

Usage: python mlflow_role_worker.py ROLE LR STEPS
"""

from __future__ import annotations

import sys
import time

import tracking_core

role, lr, steps = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
run = tracking_core.attach(
    role=role,
    writer=True,
    collect=False,
    flush_interval=0.05,
    config={"lr": lr, "role_name": role, "seed": 1234},
)
for step in range(steps):
    run.log_metrics(
        {"loss": 1.0 / (step + 1), "kl": step * 0.5, "passrate/pass@1": 0.25},
        step=step,
        step_key="train/step",
    )
    if step % 20 == 0:
        time.sleep(0.01)
summary = run.finish(90)
assert summary is not None  # a writer's summary
assert summary.drained, summary.describe()
assert not any(b["failures"] for b in summary.backends.values()), summary.describe()
print(summary.describe())
