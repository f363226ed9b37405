"""A two-role job as a user writes it, run by tests/install/test_wheel.py with the installed
package (copied outside the checkout): the driver starts the run on MLflow and one process per
role attaches to it and logs three steps. Prints the MLflow run id.

Usage: python wheel_two_roles.py            (the driver)
       python wheel_two_roles.py ROLE       (a role's process: finds the run from $TRACKING_CORE_RUN)
"""

from __future__ import annotations

import subprocess
import sys

import tracking_core

if len(sys.argv) > 1:  # a role's process: finds the run from $TRACKING_CORE_RUN
    role = sys.argv[1]
    run = tracking_core.attach(role=role, writer=True, collect=False,
                               config={"lr": 3e-3 if role == "actor" else 1e-2, "hidden_size": 16})  # fmt: skip
    for step in range(3):
        run.log_metrics({"train/loss": 1.0 / (step + 1)}, step=step, step_key="train/step")
    ended = run.finish(60)
    assert ended is not None and ended.drained
    sys.exit(0)

run = tracking_core.start_run({"seed": 7, "num_rollout": 3}, backends="mlflow", name="two-roles",
                              options={"mlflow_experiment": "install-check"})  # fmt: skip
for role in ("actor", "critic"):
    subprocess.run([sys.executable, __file__, role], check=True)
summary = run.finish(60)
assert summary.drained, summary.describe()
print(run.handle.backends["mlflow"]["run_id"])
