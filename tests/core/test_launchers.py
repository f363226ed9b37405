"""The job's run found from the launcher's job identity: the same id in every process of a job
(and in a restarted driver), a different one per job; attach without any handle."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

import tracking_core
from tests.faults.mlflow_runs import steps_of, the_run
from tests.helpers.mlflow_server import MlflowServer
from tests.helpers.subprocess_python import JOBS, run_python
from tracking_core.launchers import job_run_id

JOB_VARS = ("TRACKING_CORE_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TRACKING_CORE_RUN_ID": "mine", "TORCHELASTIC_RUN_ID": "e", "SLURM_JOB_ID": "7"}, ("mine", "$TRACKING_CORE_RUN_ID")),
        ({"TORCHELASTIC_RUN_ID": "e1", "SLURM_JOB_ID": "7"}, ("torchelastic-e1", "$TORCHELASTIC_RUN_ID")),
        ({"TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": "7"}, ("slurm-7", "$SLURM_JOB_ID")),  # torchrun's default
        ({"TORCHELASTIC_RUN_ID": " ", "SLURM_JOB_ID": " 8 "}, ("slurm-8", "$SLURM_JOB_ID")),
        ({"TRACKING_CORE_RUN_ID": "", "TORCHELASTIC_RUN_ID": "NONE"}, None),
        ({}, None),
    ],
)
def test_job_run_id_order(env: dict[str, str], expected: tuple[str, str] | None) -> None:
    import sys

    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        pytest.skip("Ray is initialised in this process: its job id would answer")
    assert job_run_id(env) == expected


def test_job_run_id_never_imports_ray() -> None:
    done = run_python(
        JOBS / "launchers_no_ray.py",
        drop=("TRACKING_CORE_*", *JOB_VARS),
    )
    assert done.stdout.split() == ["None", "False"]


@pytest.mark.slow
def test_rays_job_id_is_the_same_in_the_driver_and_its_actors() -> None:
    pytest.importorskip("ray")
    done = run_python(JOBS / "launchers_ray_job_id.py", env={"RAY_AUTH_MODE": "disabled"}, drop=("TRACKING_CORE_*", *JOB_VARS), timeout=180)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    session = got["session"].removeprefix("session_")
    assert got["driver"] == [f"ray-{session}-{got['job']}", "Ray's job id (ray.get_runtime_context())"]
    assert got["task"] == got["driver"]


def test_attach_without_handle_or_job_id_names_the_job_id_variables() -> None:
    done = run_python(
        JOBS / "launchers_no_handle.py",
        drop=("TRACKING_CORE_*", *JOB_VARS),
    )
    message = done.stdout
    assert "found no run handle" in message and "TRACKING_CORE_RUN" in message
    for name in (*JOB_VARS, "Ray's job id"):
        assert name in message, message


def test_attach_builds_the_handle_from_the_job_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*JOB_VARS, "TRACKING_CORE_RUN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("TRACKING_CORE_BACKENDS", "jsonl")
    monkeypatch.setenv("TRACKING_CORE_DIR", str(tmp_path / "td"))
    idle = tracking_core.attach(role="actor", writer=False)
    assert not idle.is_writer and idle.run_id == "slurm-4242"
    run = tracking_core.attach(role="actor", writer=True, collect=False, delivery="thread")
    try:
        assert run.is_writer and run.run_id == "slurm-4242" and run.backends == ["jsonl"]
        handle = run.handle
        assert handle.name == "slurm-4242" and handle.pending == ["jsonl"]
        assert handle.backends["jsonl"]["dir"] == str(tmp_path / "td" / "jsonl" / "slurm-4242")
        run.log_metrics({"loss": 1.0}, step=0)
    finally:
        run.finish(timeout=10)
    lines = (tmp_path / "td" / "jsonl" / "slurm-4242" / "actor.jsonl").read_text().splitlines()
    assert [json.loads(x)["name"] for x in lines if json.loads(x)["type"] == "metric"] == ["actor/loss"]


@pytest.mark.slow
def test_a_restarted_driver_continues_the_jobs_run(
    mlflow_server: MlflowServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchrun restarts a failed driver with the same rendezvous id: the new process's
    start_run finds the job's MLflow run and goes on in it; an odd id is a name everywhere."""
    for name in (*JOB_VARS, "TRACKING_CORE_RUN"):
        monkeypatch.delenv(name, raising=False)
    elastic = f"odd/../id x:{uuid.uuid4().hex[:8]}"
    env = {"TORCHELASTIC_RUN_ID": elastic, "TRACKING_CORE_DIR": str(tmp_path / "td")}
    ids = [
        run_python(JOBS / "launchers_restarted_driver.py", args=[mlflow_server.uri, str(first)], env=env, drop=("TRACKING_CORE_*", *JOB_VARS)).stdout.splitlines()[-1]
        for first in (0, 2)
    ]
    run_id = f"torchelastic-{elastic}"
    assert ids == [run_id, run_id]
    mlrun = the_run(mlflow_server.uri, run_id)  # one MLflow run for both processes
    assert steps_of(mlflow_server.uri, mlrun.info.run_id, "loss") == [0, 1, 2, 3]
    assert mlrun.info.status == "FINISHED"
    runs = tmp_path / "td" / "runs"
    assert [p.parent.parent == runs for p in runs.glob("*/handle.json")] == [True]  # inside, one folder
    assert all(p.resolve().is_relative_to(tmp_path / "td") for p in (tmp_path / "td").rglob("*"))


def test_a_second_run_in_one_process_gets_its_own_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that starts run after run under one job id (a sweep, a notebook under Ray)
    gets one run each: only its first takes the job's id."""
    for name in (*JOB_VARS, "TRACKING_CORE_RUN"):
        monkeypatch.delenv(name, raising=False)
    job = f"sweep-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("TRACKING_CORE_RUN_ID", job)
    ids = []
    for _ in range(2):
        run = tracking_core.start_run(backends=["jsonl"], tracking_dir=tmp_path, export=False, delivery="thread")
        ids.append(run.run_id)
        run.finish(timeout=10)
    assert ids[0] == job and ids[1] != job
