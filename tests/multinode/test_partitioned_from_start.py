"""A writer that never reached the tracker is still known: node1 is cut off from the MLflow server
from its start, its critic logs every step into its journal, then node1 is killed.

The job is test_torchrun_nodes.py's (node_worker.py, MODE=lost): torchrun across two simulated
nodes, the driver and the actor on node0, the critic's writer on node1, whose only route to the
server is a :class:`~tests.helpers.nodes.Link` held from before node1 starts. The critic's
delivery never opens the run, so the tracker's writer registry never hears of it; the job's c10d
store (torchrun's, reached by both nodes) heard of it when it attached. The driver's summary
must name it, with its host and the command to run there, and the run must not end FINISHED;
once node1 is back, that command there completes the run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.mlflow_server import MlflowServer, free_port
from tests.helpers.nodes import Link, NodeProcess, SimulatedNode
from tests.multinode.test_torchrun_nodes import (
    INCOMPLETE_TAG,
    INTENDED_TAG,
    STEPS,
    WORKER,
    _expected_run_id,
    _job_env,
    _poll,
    _the_run,
    _wait_report,
    _writers,
)


def _metric_history(uri: str, mlflow_run_id: str, key: str) -> list[Any]:
    from mlflow.tracking import MlflowClient

    return list(MlflowClient(uri).get_metric_history(mlflow_run_id, key))


def _node(
    tmp_path: Path, name: str, control: Path, uri: str, rank: int, port: int, job: str
) -> tuple[SimulatedNode, NodeProcess]:
    env = {**_job_env(control, "lost", uri), "FLUSH_TIMEOUT": "1"}  # it cannot flush: no route
    node = SimulatedNode(name, tmp_path / "nodes", env=env)
    proc = node.start(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
         "--node-rank", str(rank), "--master-addr", "127.0.0.1", "--master-port", str(port),
         "--rdzv-id", job, str(WORKER)],
        label="torchrun",
    )  # fmt: skip
    return node, proc


@pytest.mark.slow
def test_a_writer_cut_off_from_its_start_then_killed_is_named(
    tmp_path: Path, simulated_nodes: list[SimulatedNode], mlflow_server: MlflowServer
) -> None:
    uri = mlflow_server.uri
    job = f"job-{time.time_ns():x}"
    control = tmp_path / "control"
    control.mkdir()
    port = free_port()
    with Link("127.0.0.1", mlflow_server.port) as link:  # node1's only route to the server
        link.hold()  # from before node1 starts: nothing it sends reaches the server
        node0, proc0 = _node(tmp_path, "node0", control, uri, 0, port, job)
        node1, proc1 = _node(tmp_path, "node1", control, link.uri, 1, port, job)
        simulated_nodes.extend([node0, node1])
        procs = [proc0, proc1]
        _poll("the critic's first half logged", (control / "critic-flushed").exists, procs, 180)
        assert json.loads((control / "critic-flushed").read_text())["flushed"] is False
        (control / "held").touch()
        _poll("the critic logged every step", (control / "critic-logged").exists, procs, 120)
        node1.kill()
        link.sever()

        (control / "finish").touch()
        report = _wait_report(control, 0, procs[:1])
        summary = report["summary"]
        driver_log = proc0.output()
        # the driver names the critic's writer: its role, its host, and the command to run there
        assert "critic rank 1 on host node1" in summary, driver_log[-6000:]
        assert "never reached the tracker" in summary and "tracking-core sync" in summary, summary
        assert "marked FAILED" in summary, summary
        assert summary in driver_log  # what the driver's log said
        run = _the_run(uri, _expected_run_id(job))
        assert run.info.status == "FAILED", run.info.status
        incomplete = run.data.tags[INCOMPLETE_TAG]
        assert "critic rank 1 on host node1" in incomplete and "tracking-core sync" in incomplete, (
            incomplete
        )
        assert str(node1.tracking_dir) in incomplete, incomplete  # its sync names node1's own dir
        assert run.data.tags[INTENDED_TAG] == "FINISHED"
        # it never reached the tracker: no value and no registry entry of its own there
        assert not [k for k in run.data.metrics if k.startswith("critic/")], run.data.metrics
        assert "critic" not in {w["role"] for w in _writers(run).values()}, _writers(run)
        node0.kill()  # torchrun's agent waits at its exit barrier for node1's agent, which is gone

        # node1 comes back with its route: `tracking-core sync` there, with node1's own
        # settings, delivers the critic's journal and the run gets the status it was meant to
        link.release()
        synced = node1.run(["tracking-core", "sync"], label="sync", timeout=180)
        assert synced.returncode == 0, synced.stdout
        run = _the_run(uri, _expected_run_id(job))
        steps = [m.step for m in _metric_history(uri, run.info.run_id, "critic/train/loss")]
        assert sorted(steps) == list(range(STEPS)), steps
        assert run.info.status == "FINISHED" and INCOMPLETE_TAG not in run.data.tags, run.data.tags
