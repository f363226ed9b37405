"""A small finished run, logged by a fresh interpreter to real trackers: a launch config, an
actor and a critic with their own configs and three steps of metrics each."""

from __future__ import annotations

import json
from pathlib import Path

from tracking_core.handle import RunHandle

from .subprocess_python import JOBS, run_python

#: The job.
SCRIPT = JOBS / "saved_run.py"

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
