"""A small finished run (tests/helpers/saved_run.py runs it in a fresh interpreter): a launch
config, an actor and a critic with their own configs and three steps of metrics each. Prints the
run directory and the run's status as JSON.

Usage: python saved_run.py TRACKING_DIR BACKENDS   (BACKENDS: comma-separated)
"""

from __future__ import annotations

import json
import sys

import tracking_core

tracking_dir, backends = sys.argv[1], sys.argv[2].split(",")
run = tracking_core.start_run(
    config={"lr": 1e-3, "seed": 7, "kl_coef": 0.0},
    backends=backends, tracking_dir=tracking_dir, name="saved-run",
)
actor = tracking_core.attach(role="actor", config={"lr": 2e-3, "kl_coef": 0.0}, collect=False)
critic = tracking_core.attach(role="critic", config={"lr": 1e-2, "kl_coef": 0}, collect=False)
for step in range(3):
    actor.log_metrics({"train/pg_loss": 1.0 / (step + 1)}, step=step, step_key="train/step")
    critic.log_metrics({"train/value_loss": 2.0 / (step + 1)}, step=step, step_key="train/step")
# generous bounds: a fresh embedded MLflow store is slow to open on a loaded machine
actor.finish(timeout=240)
critic.finish(timeout=240)
summary = run.finish(timeout=240)
print(json.dumps({"run_dir": str(run.handle.run_dir), "status": summary.status.value}))
