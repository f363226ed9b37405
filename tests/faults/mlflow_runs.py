"""Reading back what a real ``mlflow server`` holds for one job (found by its run-id tag)."""

from __future__ import annotations

from typing import Any

RUN_ID_TAG = "tracking_core.run_id"


def runs_of_job(uri: str, run_id: str) -> list[Any]:
    """Every MLflow run tagged with the job's run id, in every experiment of the server."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    return list(client.search_runs(experiments, filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'"))


def the_run(uri: str, run_id: str) -> Any:
    runs = runs_of_job(uri, run_id)
    assert len(runs) == 1, f"{len(runs)} MLflow runs for job {run_id} on {uri}"
    return runs[0]


def steps_of(uri: str, mlflow_run_id: str, key: str) -> list[int]:
    """The steps of every point of ``key`` (sorted; a step twice shows twice)."""
    from mlflow.tracking import MlflowClient

    return sorted(m.step for m in MlflowClient(uri).get_metric_history(mlflow_run_id, key))
