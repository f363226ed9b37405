"""One torchrun job across two simulated nodes, one MLflow run, read back with MLflow's own client.

node0 and node1 each have their own hostname, tracking directory, working directory, $TMPDIR and
process tree (tests/helpers/nodes.py); a real ``mlflow server`` on 127.0.0.1 is the only store
they share. Each node runs ``torchrun --nnodes 2 --node-rank K`` with static rendezvous on
127.0.0.1 and ``--rdzv-id <job>``, so ``TORCHELASTIC_RUN_ID`` is the job id on both nodes (it is
the literal ``none`` without ``--rdzv-id``). Rank 0 (node0) starts the run and writes for the
actor; rank 1 (node1) writes for the critic, with no run handle passed to it: its run is found
from the launcher's job id. System metrics are on in both nodes.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.mlflow_server import MlflowServer, free_port
from tests.helpers.nodes import Link, NodeProcess, SimulatedNode
from tests.helpers.subprocess_python import JOBS

WORKER = JOBS / "node_worker.py"
ROOT = Path(__file__).resolve().parents[2]
STEPS = 4
RUN_ID_TAG = "tracking_core.run_id"
WRITER_TAG = "tracking_core.writer."
INCOMPLETE_TAG = "tracking_core.incomplete"
INTENDED_TAG = "tracking_core.intended_status"
SYSTEM_SERIES = "cpu/utilization"


def _job_env(control: Path, mode: str, tracking_uri: str) -> dict[str, str]:
    return {
        "PYTHONPATH": f"{ROOT}:{ROOT / 'plugins'}",
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "OMP_NUM_THREADS": "1",
        "CONTROL_DIR": str(control),
        "MODE": mode,
        "STEPS": str(STEPS),
        "FINISH_TIMEOUT": "8",
        "MLFLOW_TRACKING_URI": tracking_uri,
        "TRACKING_CORE_BACKENDS": "mlflow",
        "TRACKING_CORE_SYSTEM_METRICS": "0.5",
    }


def _torchrun(node: SimulatedNode, rank: int, port: int, job: str) -> NodeProcess:
    return node.start(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
         "--node-rank", str(rank), "--master-addr", "127.0.0.1", "--master-port", str(port),
         "--rdzv-id", job, str(WORKER)],
        label="torchrun",
    )  # fmt: skip


def _two_nodes(
    tmp_path: Path, nodes: list[SimulatedNode], mode: str, uris: tuple[str, str]
) -> tuple[str, Path, list[NodeProcess]]:
    job = f"job-{time.time_ns():x}"
    control = tmp_path / "control"
    control.mkdir()
    port = free_port()
    for rank, uri in enumerate(uris):
        nodes.append(
            SimulatedNode(f"node{rank}", tmp_path / "nodes", env=_job_env(control, mode, uri))
        )
    procs = [_torchrun(node, rank, port, job) for rank, node in enumerate(nodes)]
    return job, control, procs


def _expected_run_id(job: str) -> str:
    from tracking_core.launchers import job_run_id

    found = job_run_id({"TORCHELASTIC_RUN_ID": job})
    assert found is not None
    return found[0]


def _the_run(uri: str, run_id: str) -> Any:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'")
    assert len(runs) == 1, f"{len(runs)} MLflow runs tagged {RUN_ID_TAG}={run_id}"
    return runs[0]


def _history(uri: str, mlflow_run_id: str, key: str) -> list[tuple[int, float]]:
    from mlflow.tracking import MlflowClient

    return sorted(
        (m.step, m.value) for m in MlflowClient(uri).get_metric_history(mlflow_run_id, key)
    )


def _writers(run: Any) -> dict[str, dict[str, Any]]:
    return {
        k[len(WRITER_TAG) :]: json.loads(v)
        for k, v in run.data.tags.items()
        if k.startswith(WRITER_TAG)
    }


def _poll(
    what: str, check: Callable[[], Any], procs: list[NodeProcess], timeout: float = 90.0
) -> Any:
    """``check()``'s first true value; fails at once if a node's command failed meanwhile."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.returncode not in (None, 0):
                raise AssertionError(f"{what}: torchrun exited {proc.returncode}\n{proc.tail()}")
        try:
            last = check()
        except AssertionError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.3)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last!r})")


def _wait_report(
    control: Path, rank: int, procs: list[NodeProcess], timeout: float = 180.0
) -> dict[str, Any]:
    path = control / f"report-{rank}.json"
    deadline = time.monotonic() + timeout
    while not path.exists():
        for proc in procs:
            if proc.returncode not in (None, 0):
                raise AssertionError(f"torchrun exited {proc.returncode}\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no {path.name} within {timeout:.0f} s\n" + "\n".join(p.tail(3000) for p in procs)
            )
        time.sleep(0.2)
    return json.loads(path.read_text())


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _check_disks(nodes: list[SimulatedNode]) -> None:
    """Each node's tracking files under its own directory, none of the other role's."""
    node0, node1 = (_files(n.root) for n in nodes)
    assert any("critic" in f for f in node1 if f.startswith("tracking/")), node1
    assert not [f for f in node0 if "critic" in f], node0
    assert not [f for f in node1 if "actor" in f or "launch" in f], node1
    for node in nodes:  # nothing in a working directory: local data goes to $TRACKING_CORE_DIR
        assert _files(node.cwd) == [], (node.name, _files(node.cwd))


def _check_system_series(uri: str, run: Any) -> None:
    for host in ("node0", "node1"):
        key = f"system/{host}/{SYSTEM_SERIES}"
        assert key in run.data.metrics, sorted(
            k for k in run.data.metrics if k.startswith("system/")
        )
        steps = [s for s, _ in _history(uri, run.info.run_id, key)]
        assert steps and len(steps) == len(set(steps)), (key, steps)


@pytest.mark.slow
def test_two_nodes_one_run_each_role_once(
    tmp_path: Path, simulated_nodes: list[SimulatedNode], mlflow_server: MlflowServer
) -> None:
    uri = mlflow_server.uri
    job, control, procs = _two_nodes(tmp_path, simulated_nodes, "complete", (uri, uri))
    for proc in procs:
        assert proc.wait(240) == 0, proc.tail()
    reports = [_wait_report(control, rank, procs) for rank in (0, 1)]
    assert [r["host"] for r in reports] == ["node0", "node1"]
    assert {r["elastic_run_id"] for r in reports} == {job}
    run_id = _expected_run_id(job)
    assert {r["run_id"] for r in reports} == {run_id}
    driver_log = procs[0].output()
    assert "NOT delivered" not in reports[0]["summary"] and "sync" not in reports[0]["summary"], (
        driver_log[-4000:]
    )

    run = _the_run(uri, run_id)  # one run for the job
    assert run.info.status == "FINISHED"
    assert INCOMPLETE_TAG not in run.data.tags
    params = run.data.params
    assert (params["job"], params["lr"]) == ("ppo", "1e-06")  # the launch config
    assert (params["actor/lr"], params["actor/tp"]) == ("1e-06", "1")
    assert (params["critic/lr"], params["critic/pp"]) == ("1e-05", "1")
    # each role's metric exactly once per step, from its writer rank (node0's rank 0, node1's rank 1)
    for role, rank in (("actor", 0), ("critic", 1)):
        loss = _history(uri, run.info.run_id, f"{role}/train/loss")
        assert [s for s, _ in loss] == list(range(STEPS)), (role, loss)
        assert Counter(v for _, v in _history(uri, run.info.run_id, f"{role}/train/rank_seen")) == {
            float(rank): STEPS
        }
    # one role across both nodes: its values reduced exactly over the two ranks, its phase timed
    from tests.jobs.node_worker import score

    scores = _history(uri, run.info.run_id, "reward/score")
    assert [s for s, _ in scores] == list(range(STEPS)), scores
    for step, value in scores:
        assert math.isclose(value, (score(0, step) * 1 + score(1, step) * 2) / 3, rel_tol=1e-9), (step, value)
    assert [v for _, v in _history(uri, run.info.run_id, "reward/n")] == [3.0] * STEPS
    assert [v for _, v in _history(uri, run.info.run_id, "reward/perf/score/slowest_rank")] == [1.0] * STEPS
    trace = json.loads(next(simulated_nodes[0].tracking_dir.rglob(f"runs/{run_id}/trace-reward.json")).read_text())
    assert {(e["pid"], e["args"]["step"]) for e in trace["traceEvents"] if e["ph"] == "X"} == {
        (r, s) for r in (0, 1) for s in range(STEPS)
    }
    writers = _writers(run)
    by_role = {w["role"]: w for w in writers.values()}
    assert by_role["critic"]["host"] == "node1" and by_role["actor"]["host"] == "node0", writers
    assert {w["state"] for w in writers.values()} == {"complete"}, writers
    assert Path(by_role["critic"]["tracking_dir"]).is_relative_to(
        simulated_nodes[1].tracking_dir
    ), writers
    _check_system_series(uri, run)
    _check_disks(simulated_nodes)


def _critic_steps(uri: str, mlflow_run_id: str) -> list[int]:
    return [s for s, _ in _history(uri, mlflow_run_id, "critic/train/loss")]


@pytest.mark.slow
def test_lost_node_is_named_and_its_own_sync_completes_it_once(
    tmp_path: Path,
    simulated_nodes: list[SimulatedNode],
    mlflow_server: MlflowServer,
) -> None:
    uri = mlflow_server.uri
    with Link("127.0.0.1", mlflow_server.port) as link:  # node1's route to the server
        job, control, procs = _two_nodes(tmp_path, simulated_nodes, "lost", (uri, link.uri))
        node0, node1 = simulated_nodes
        run_id = _expected_run_id(job)
        half = STEPS // 2
        _poll("the critic's first half flushed", (control / "critic-flushed").exists, procs, 180)
        assert json.loads((control / "critic-flushed").read_text())["flushed"] is True

        def critic_registered_and_first_half_delivered() -> Any:
            run = _the_run(uri, run_id)
            registered = any(w["role"] == "critic" for w in _writers(run).values())
            return (
                run
                if registered and _critic_steps(uri, run.info.run_id) == list(range(half))
                else None
            )

        run = _poll(
            "the critic registered as a writer, its first half in MLflow",
            critic_registered_and_first_half_delivered,
            procs,
        )
        mlflow_run_id = run.info.run_id
        # node1's route holds from here: what the critic logs next is journaled, not delivered
        link.hold()
        (control / "held").touch()
        _poll("the critic logged the rest", (control / "critic-logged").exists, procs, 120)
        node1.kill()
        link.sever()
        link.release()
        assert _critic_steps(uri, mlflow_run_id) == list(range(half))

        (control / "finish").touch()
        report = _wait_report(control, 0, procs[:1])
        summary = report["summary"]
        # the driver's finish names the lost writer: role, host and the command to run there
        assert "critic" in summary and "node1" in summary and "tracking-core sync" in summary, (
            procs[0].output()[-6000:]
        )
        assert summary in procs[0].output()  # what the driver's log said
        run = _the_run(uri, run_id)
        assert run.info.status != "FINISHED"
        incomplete = run.data.tags[INCOMPLETE_TAG]
        assert (
            "critic" in incomplete and "node1" in incomplete and "tracking-core sync" in incomplete
        ), incomplete
        assert run.data.tags[INTENDED_TAG] == "FINISHED"
        critic = next(w for w in _writers(run).values() if w["role"] == "critic")
        assert critic["host"] == "node1" and critic["state"] != "complete", critic
        assert Path(critic["tracking_dir"]).is_relative_to(node1.tracking_dir), critic
        node0.kill()  # torchrun's agent waits at its exit barrier for node1's agent, which is gone

        # node1 comes back: `tracking-core sync` there, with node1's own settings, completes the run
        synced = node1.run(["tracking-core", "sync"], label="sync", timeout=180)
        assert synced.returncode == 0, synced.stdout
        run = _the_run(uri, run_id)
        assert _history(uri, mlflow_run_id, "critic/train/loss") == [
            (s, 1.0 / (s + 1)) for s in range(STEPS)
        ]
        assert run.info.status == "FINISHED" and INCOMPLETE_TAG not in run.data.tags, run.data.tags
        # the exact command the writer named, run again on node1: nothing twice
        again = node1.run(shlex.split(critic["sync"]), label="sync-again", timeout=180)
        assert again.returncode == 0, again.stdout
        assert _critic_steps(uri, mlflow_run_id) == list(range(STEPS))
        assert _the_run(uri, run_id).info.status == "FINISHED"
        _check_system_series(uri, run)
