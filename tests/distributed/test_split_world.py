"""One torchrun world of 4 ranks split into roles (0-1 the actor, 2-3 the critic), one MLflow run.

With ``attach(group=...)`` each role's writer is its group's rank 0 (ranks 0 and 2) and both
roles' values reach a real ``mlflow server``. Without it the world's rank 0 is the only writer:
the critic's ranks say at attach that their role has no writer, and the driver's end-of-run
summary names the critic role.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.mlflow_server import MlflowServer
from tests.helpers.subprocess_python import JOBS
from tests.helpers.torchrun import job_env, torchrun

WORKER = JOBS / "split_worker.py"
STEPS = 6
RUN_ID_TAG = "tracking_core.run_id"


def _job(tmp_path: Path, uri: str, group: bool) -> tuple[list[dict[str, Any]], str]:
    reports = tmp_path / "reports"
    reports.mkdir()
    env = job_env(
        tmp_path,
        REPORT_DIR=str(reports),
        STEPS=str(STEPS),
        GROUP="1" if group else "0",
        MLFLOW_TRACKING_URI=uri,
        MLFLOW_EXPERIMENT_NAME=f"split-{tmp_path.name}",
        TRACKING_CORE_BACKENDS="mlflow",
    )
    done = torchrun(WORKER, 4, tmp_path, env, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    return [json.loads((reports / f"{rank}.json").read_text()) for rank in range(4)], output


def _the_run(uri: str, run_id: str) -> Any:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'")
    assert len(runs) == 1, runs
    return runs[0]


def _history(uri: str, mlflow_run_id: str, key: str) -> list[tuple[int, float]]:
    from mlflow.tracking import MlflowClient

    return sorted(
        (m.step, m.value) for m in MlflowClient(uri).get_metric_history(mlflow_run_id, key)
    )


@pytest.mark.slow
def test_group_names_each_roles_ranks_and_both_roles_arrive(
    tmp_path: Path, mlflow_server: MlflowServer
) -> None:
    reports, output = _job(tmp_path, mlflow_server.uri, group=True)
    assert [r["writer"] for r in reports] == [True, False, True, False], reports
    for r in reports:  # a group this rank is not in is said, with what to pass instead
        assert (
            f"this process (torch.distributed rank {r['rank']}) is not in the group" in r["outside"]
        ), r
    summary = reports[0]["summary"]
    assert (
        reports[0]["status"] == "FINISHED"
        and "no writer" not in summary
        and "none of them" not in summary
    ), summary
    assert "has no writer" not in output, output[-4000:]
    run = _the_run(mlflow_server.uri, reports[0]["run_id"])
    assert run.info.status == "FINISHED" and "tracking_core.incomplete" not in run.data.tags, (
        run.data.tags
    )
    for role, writer_rank in (("actor", 0), ("critic", 2)):
        loss = _history(mlflow_server.uri, run.info.run_id, f"{role}/train/loss")
        assert [s for s, _ in loss] == list(range(STEPS)), (role, loss, output[-4000:])
        seen = {
            v for _, v in _history(mlflow_server.uri, run.info.run_id, f"{role}/train/rank_seen")
        }
        assert seen == {float(writer_rank)}, (role, seen)
        # reduced over the role's own group: ranks 0+1 and 2+3, all of them each step
        summed = _history(mlflow_server.uri, run.info.run_id, f"{role}/train/rank_sum")
        assert summed == [(s, float(writer_rank * 2 + 1)) for s in range(STEPS)], (role, summed)
        assert not _history(mlflow_server.uri, run.info.run_id, f"{role}/train/rank_sum/ranks")
    assert run.data.params["critic/lr"] == "1e-05"


@pytest.mark.slow
def test_a_role_without_a_writer_is_said_at_attach_and_in_the_summary(
    tmp_path: Path, mlflow_server: MlflowServer
) -> None:
    reports, output = _job(tmp_path, mlflow_server.uri, group=False)
    assert [r["writer"] for r in reports] == [True, False, False, False], reports
    # each critic rank says so at attach: its role has no writer, and what to do
    for rank in (2, 3):
        said = [
            line
            for line in output.splitlines()
            if "role 'critic' has no writer" in line and f"rank {rank} " in line
        ]
        assert len(said) == 1, output[-6000:]
        assert "attach(role='critic', group=" in said[0] and "'actor'" in said[0], said[0]
    assert "role 'actor' has no writer" not in output
    # the driver's summary names the critic role, its ranks and host
    summary = reports[0]["summary"]
    host = socket.gethostname()
    assert (
        f"role critic: 2 process(es) attached (ranks 2-3 on {host}), none of them its writer"
        in summary
    ), summary
    assert "role actor" not in summary, summary
    assert "attach(role='critic', group=...)" in summary
    assert summary in output  # said in the driver's log, not only returned
    run = _the_run(mlflow_server.uri, reports[0]["run_id"])
    assert not [k for k in run.data.metrics if k.startswith("critic/")], run.data.metrics
