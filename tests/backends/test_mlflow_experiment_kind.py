"""An experiment that already existed without MLflow's experiment kind is tagged as model
training when a job logs to it, named by its name or by its id: MLflow 3's UI opens an
experiment without the tag in its GenAI view, not on the run's charts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.subprocess_python import JOBS, run_python

KIND_TAG = "mlflow.experimentKind"

JOB = JOBS / "mlflow_experiment_kind.py"


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(600)
@pytest.mark.parametrize("named_by", ["MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"])
def test_an_existing_experiment_gets_the_training_kind(named_by: str, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'store.db'}"
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("made-before", artifact_location=str(tmp_path / "artifacts"))
    assert KIND_TAG not in client.get_experiment(experiment_id).tags
    value = experiment_id if named_by == "MLFLOW_EXPERIMENT_ID" else "made-before"
    run_python(JOB, env={"MLFLOW_TRACKING_URI": uri, named_by: value}, cwd=tmp_path, timeout=300)
    assert client.get_experiment(experiment_id).tags[KIND_TAG] == "custom_model_development"
    (run,) = client.search_runs([experiment_id])
    assert run.info.status == "FINISHED"
