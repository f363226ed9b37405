"""A small finished run, logged by a fresh interpreter to real trackers: a launch config, an
actor and a critic with their own configs and three steps of metrics each."""

from __future__ import annotations

import json
from pathlib import Path

from tracking_core.handle import RunHandle

from .subprocess_python import run_python

SCRIPT = """
import json, sys
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
"""

#: What the run logged last, per role (the values a reader must find).
LAST = {"actor": {"train/pg_loss": 1.0 / 3}, "critic": {"train/value_loss": 2.0 / 3}}


def mlflow_run_of(handle: RunHandle) -> tuple[str, str]:
    """``(experiment id, run id)`` of the job's MLflow run, found in the store by its tag."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(handle.backends["mlflow"]["tracking_uri"])
    experiments = [e.experiment_id for e in client.search_experiments()]
    (run,) = client.search_runs(experiments, f"tags.`tracking_core.run_id` = '{handle.run_id}'")
    return run.info.experiment_id, run.info.run_id


def make_saved_run(tracking_dir: Path, backends: str) -> RunHandle:
    done = run_python(
        SCRIPT,
        args=[tracking_dir, backends],
        drop=("TRACKING_CORE_*", "MLFLOW_*", "WANDB_*", "TENSORBOARD_DIR"),
        env={"WANDB_MODE": "offline", "WANDB_SILENT": "true"},
        cwd=tracking_dir,
        timeout=900,
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == "FINISHED", done.stderr
    if any(p.is_dir() for p in (tracking_dir / "journal").glob("*/*")):
        # A role that finished before the primary had opened the run in a slow tracker (a new
        # embedded MLflow store on a loaded machine) leaves its records in its journal, as
        # documented: deliver them as a user would.
        run_python(
            "import sys; from tracking_core import cli; sys.exit(cli.main(sys.argv[1:]))",
            args=["sync", "--quiet", tracking_dir],
            drop=("TRACKING_CORE_*", "MLFLOW_*"),
            timeout=600,
        )
    left = [p for p in (tracking_dir / "journal").glob("*/*") if p.is_dir()]
    assert not left, f"not everything was delivered: {left}\n{done.stderr[-3000:]}"
    return RunHandle.parse(out["run_dir"])
