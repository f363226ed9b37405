"""Each node owns its disk: a writer on another host writes under its own tracking directory.

A simulated node (tests/helpers/nodes.py) is a process tree in its own UTS namespace (its own
hostname) with its own ``$TRACKING_CORE_DIR``, working directory and ``$TMPDIR``; a real
``mlflow server`` on 127.0.0.1 is the only store the nodes share. The writer attaches with the
handle's JSON in ``$TRACKING_CORE_RUN``, or with no handle at all where every process has the
job's identity.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest

import tracking_core
from tests.faults.mlflow_runs import steps_of, the_run
from tests.helpers.mlflow_server import MlflowServer
from tests.helpers.nodes import SimulatedNode, simulated_nodes  # noqa: F401
from tests.helpers.subprocess_python import JOBS

pytest.importorskip("mlflow")

JOB_VARS = ("TRACKING_CORE_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")

WRITER = JOBS / "node_dirs_writer.py"


def report_of(output: str) -> dict:
    lines = [line for line in output.splitlines() if line.startswith("REPORT ")]
    assert lines, output[-4000:]
    return json.loads(lines[-1].removeprefix("REPORT "))


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


@pytest.mark.slow
def test_a_writer_on_another_host_writes_only_under_its_own_directory(
    mlflow_server: MlflowServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    simulated_nodes: list[SimulatedNode],  # noqa: F811 - the fixture
) -> None:
    for name in (*JOB_VARS, "TRACKING_CORE_RUN", "TRACKING_CORE_DIR"):
        monkeypatch.delenv(name, raising=False)
    node0 = tmp_path / "node0"
    run = tracking_core.start_run(
        config={"lr": 0.5},
        backends=["jsonl", "mlflow"],
        tracking_dir=node0,
        options={"mlflow_tracking_uri": mlflow_server.uri, "mlflow_experiment": "node-dirs"},
        export=False,
    )
    assert run.flush(timeout=60)  # the run is open in MLflow; the primary's files are there
    before = _files(node0)
    handle = json.loads(run.handle.to_json())
    assert handle["host"] == os.uname().nodename and handle["tracking_dir"] == str(node0)

    node1 = SimulatedNode("node1", tmp_path / "nodes")
    simulated_nodes.append(node1)
    out = node1.run([sys.executable, str(WRITER), "60"], env={"TRACKING_CORE_RUN": run.handle.to_json()}, label="writer")
    assert out.returncode == 0, out.stdout[-4000:]
    report = report_of(out.stdout)
    assert report["host"] == "node1" and report["drained"], out.stdout[-3000:]
    assert report["tracking_dir"] == str(node1.tracking_dir)
    assert Path(report["journal"]).is_relative_to(node1.tracking_dir / "journal")
    for step in range(2):
        run.log_metrics({"loss": 0.5 - step / 10}, step=step, step_key="train/step")
    run.finish(timeout=60)

    # Node 1's files: its journal (delivered, so gone), its config, its jsonl run, a handle copy.
    mine = _files(node1.tracking_dir)
    assert f"runs/{run.run_id}/config/critic.json" in mine, sorted(mine)
    assert f"jsonl/{run.run_id}/critic.jsonl" in mine, sorted(mine)
    copy = json.loads((node1.tracking_dir / "runs" / run.run_id / "handle.json").read_text())
    assert copy["tracking_dir"] == str(node1.tracking_dir) and copy["host"] == "node1"
    assert copy["backends"]["jsonl"]["dir"] == str(node1.tracking_dir / "jsonl" / run.run_id)  # rebased
    assert not any(node1.tracking_dir.rglob("meta.json"))  # every journal delivered
    assert _files(node1.cwd) == set()  # nothing in its working directory
    # Nothing under the primary's path came from node 1.
    added = {p for p in _files(node0) - before if "/primary-p" not in p}
    assert not any("critic" in p for p in added | before), sorted(added)
    assert added <= {f"jsonl/{run.run_id}/primary.jsonl", f"runs/{run.run_id}/handle.json"}, sorted(added)
    critic = [json.loads(x) for x in (node1.tracking_dir / "jsonl" / run.run_id / "critic.jsonl").read_text().splitlines()]
    assert [x["step"] for x in critic if x["type"] == "metric"] == [0, 1, 2]

    mlrun = the_run(mlflow_server.uri, run.run_id)
    assert mlrun.data.params["lr"] == "0.5" and mlrun.data.params["critic/critic_lr"] == "0.25"
    assert steps_of(mlflow_server.uri, mlrun.info.run_id, "critic/loss") == [0, 1, 2]
    assert steps_of(mlflow_server.uri, mlrun.info.run_id, "loss") == [0, 1]
    assert mlrun.info.status == "FINISHED"


PRIMARY = JOBS / "node_dirs_primary.py"


@pytest.mark.slow
@pytest.mark.parametrize("variable", JOB_VARS)
def test_without_a_handle_the_job_id_finds_the_run_from_another_host(
    mlflow_server: MlflowServer, tmp_path: Path, variable: str,
    simulated_nodes: list[SimulatedNode],  # noqa: F811 - the fixture
) -> None:
    job = uuid.uuid4().hex[:12]
    expected = {"TRACKING_CORE_RUN_ID": f"ppo-{job}", "TORCHELASTIC_RUN_ID": f"torchelastic-{job}", "SLURM_JOB_ID": f"slurm-{job}"}[variable]
    same = {
        variable: expected if variable == "TRACKING_CORE_RUN_ID" else job,
        "TRACKING_CORE_BACKENDS": "jsonl,mlflow",
        "MLFLOW_TRACKING_URI": mlflow_server.uri,
        "MLFLOW_EXPERIMENT_NAME": "job-ids",
    }
    node0, node1 = (SimulatedNode(name, tmp_path / "nodes", env=same) for name in ("node0", "node1"))
    simulated_nodes.extend([node0, node1])
    release = tmp_path / "writer-done"
    primary = node0.start([sys.executable, str(PRIMARY), str(release)], label="primary")
    try:
        assert primary.wait_for(r"STARTED (\S+)", 120).group(1) == expected
        out = node1.run([sys.executable, str(WRITER), "60"], label="writer")
    finally:
        release.touch()
    assert primary.wait(120) == 0, primary.tail()
    assert out.returncode == 0, out.stdout[-4000:]
    report = report_of(out.stdout)
    assert report["drained"] and report["tracking_dir"] == str(node1.tracking_dir), out.stdout[-3000:]
    assert f"found from ${variable} (no run handle)" in out.stdout

    assert (node1.tracking_dir / "jsonl" / expected / "critic.jsonl").is_file()
    assert (node1.tracking_dir / "runs" / expected / "config" / "critic.json").is_file()
    assert (node0.tracking_dir / "jsonl" / expected / "primary.jsonl").is_file()
    assert not any("critic" in p for p in _files(node0.tracking_dir))
    assert not any("primary" in p for p in _files(node1.tracking_dir))
    mlrun = the_run(mlflow_server.uri, expected)  # one MLflow run holds both roles
    assert mlrun.data.params["lr"] == "0.5" and mlrun.data.params["critic/critic_lr"] == "0.25"
    assert steps_of(mlflow_server.uri, mlrun.info.run_id, "critic/loss") == [0, 1, 2]
    assert steps_of(mlflow_server.uri, mlrun.info.run_id, "loss") == [0, 1]
    assert mlrun.info.status == "FINISHED"


SECONDARY = JOBS / "node_dirs_secondary.py"


def test_on_the_primarys_host_tracking_core_dir_moves_a_writer_off_an_unwritable_directory(tmp_path: Path) -> None:
    """The warning for an unwritable tracking directory says to set $TRACKING_CORE_DIR, and
    setting it in that process does move its journal and files there."""
    from tests.helpers.subprocess_python import run_python

    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the primary's tracking directory was\n")
    handle = tracking_core.RunHandle(run_id="unwritable-1", name="n", tracking_dir=str(blocker / "td"), backends={"jsonl": {}})
    spill = tmp_path / "tmp"  # the unwritable directory's journal goes to the spill location
    spill.mkdir()
    env = {"TRACKING_CORE_RUN": handle.to_json(), "TMPDIR": str(spill)}
    told = run_python(SECONDARY, env=env, drop=("TRACKING_CORE_*",), cwd=tmp_path)
    warning = [line for line in told.stderr.splitlines() if "cannot write in its tracking directory" in line]
    assert len(warning) == 1, told.stderr[-3000:]
    assert "set $TRACKING_CORE_DIR in this process to a writable directory" in warning[0]

    mine = tmp_path / "mine"
    done = run_python(SECONDARY, env={**env, "TRACKING_CORE_DIR": str(mine)}, drop=("TRACKING_CORE_*",), cwd=tmp_path)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["tracking_dir"] == str(mine) and report["journal"].startswith(str(mine / "journal"))
    assert "cannot write" not in done.stderr, done.stderr[-3000:]
    assert (mine / "jsonl" / "unwritable-1" / "critic.jsonl").is_file()


def test_local_tracking_dir_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from tracking_core.handle import local_tracking_dir

    monkeypatch.delenv("TRACKING_CORE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    here = tracking_core.RunHandle(run_id="r", name="r", tracking_dir="/primary/td", host=os.uname().nodename)
    elsewhere = tracking_core.RunHandle(run_id="r", name="r", tracking_dir="/primary/td", host="another-host")
    older = tracking_core.RunHandle.parse({"run_id": "r", "tracking_dir": "/primary/td"})  # saved before hosts
    args = SimpleNamespace(tracking_dir="from-args")
    assert older.host == "" and older.on_primary_host()
    assert local_tracking_dir(here) == Path("/primary/td")
    assert local_tracking_dir(older) == Path("/primary/td")
    assert local_tracking_dir(elsewhere) == tmp_path / "tracking-runs"
    assert local_tracking_dir(elsewhere, args) == tmp_path / "from-args"
    assert local_tracking_dir(here, args) == Path("/primary/td")
    monkeypatch.setenv("TRACKING_CORE_DIR", str(tmp_path / "env"))
    assert local_tracking_dir(here, args) == tmp_path / "env"
    assert local_tracking_dir(elsewhere, args, explicit="x") == tmp_path / "x"


def test_rebase_moves_only_paths_under_the_primarys_directory() -> None:
    from tracking_core.handle import rebase

    entry = {
        "dir": "/p/td/jsonl/run",
        "uri": "sqlite:////p/td/mlflow/mlflow.db",
        "artifacts": "file:///p/td/mlflow/artifacts",
        "same": "/p/td",
        "sibling": "/p/td2/x",
        "inside": "/q/p/td/x",
        "remote": "http://127.0.0.1:5000",
        "nested": [{"dir": "/p/td/tb"}],
        "n": 3,
    }
    assert rebase(entry, "/p/td", "/n1/td") == {
        "dir": "/n1/td/jsonl/run",
        "uri": "sqlite:////n1/td/mlflow/mlflow.db",
        "artifacts": "file:///n1/td/mlflow/artifacts",
        "same": "/n1/td",
        "sibling": "/p/td2/x",
        "inside": "/q/p/td/x",
        "remote": "http://127.0.0.1:5000",
        "nested": [{"dir": "/n1/td/tb"}],
        "n": 3,
    }
