"""Defect 7: an unusable tracking directory -- ``$TRACKING_CORE_DIR`` under a regular file, or
on a read-only file system -- never stops training. With a remote MLflow server as the only
backend, ``start_run`` does not raise and every value is delivered; the user gets one clear
warning naming the directory and the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.conftest import Faults
from tests.faults.mlflow_runs import steps_of, the_run
from tests.helpers.mlflow_server import MlflowServer
from tests.helpers.subprocess_python import JOBS

pytest.importorskip("mlflow")

JOB = JOBS / "tracking_dir.py"


def _check(job, server: MlflowServer, directory: Path) -> None:
    result = job.result
    assert result["raised"] == []
    summary = result["summary"]
    assert summary["status"] == "FINISHED"
    mlrun = the_run(server.uri, result["run_id"])
    assert steps_of(server.uri, mlrun.info.run_id, "loss") == list(range(100))
    assert mlrun.data.params.get("lr") == "0.1"
    assert mlrun.info.status == "FINISHED"
    assert summary["backends"]["mlflow"]["delivered"] == 100, summary["describe"]
    named = job.warnings_mentioning(str(directory))
    assert len(named) == 1, job.warnings
    assert "TRACKING_CORE_DIR" in named[0], named[0]
    assert "Traceback" not in job.stderr, job.stderr[-4000:]


@pytest.mark.slow
def test_a_tracking_dir_under_a_regular_file(
    mlflow_server: MlflowServer, faults: Faults, tmp_path: Path, jobs
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the tracking directory should be\n")
    directory = blocker / "tracking-runs"
    job = jobs(JOB, faults.env(TRACKING_CORE_DIR=str(directory)), args=[mlflow_server.uri]).wait()
    _check(job, mlflow_server, directory)


@pytest.mark.slow
def test_a_read_only_tracking_dir(
    mlflow_server: MlflowServer, faults: Faults, tmp_path: Path, tmpfs, jobs
) -> None:
    # Root ignores permission bits: a read-only mount is what really refuses writes.
    directory = tmpfs("1m", name="read-only", read_only=True)
    job = jobs(JOB, faults.env(TRACKING_CORE_DIR=str(directory)), args=[mlflow_server.uri]).wait()
    _check(job, mlflow_server, directory)
