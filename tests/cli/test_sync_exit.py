"""``tracking-core sync``: where there is no tracking data it says so and exits 2; a tracking
directory with nothing left to deliver exits 0; on a node, with that node's own settings, it
delivers the node's leftovers into the job's run exactly once."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from tests.faults.mlflow_runs import steps_of, the_run
from tests.helpers.mlflow_server import MlflowServer
from tests.helpers.nodes import SimulatedNode, simulated_nodes  # noqa: F401
from tests.helpers.subprocess_python import JOBS, run_python

CLI = "import sys; from tracking_core import cli; sys.exit(cli.main(sys.argv[1:]))"


def _sync(cwd: Path, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return run_python(CLI, args=["sync", "--quiet", *args], env=env, drop=("TRACKING_CORE_*",), cwd=cwd, check=False)


def test_a_directory_that_holds_no_tracking_data(tmp_path: Path) -> None:
    place = tmp_path / "checkpoints"
    place.mkdir()
    (place / "model.pt").write_text("weights\n")
    (place / "sub").mkdir()
    done = _sync(tmp_path, str(place))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert f"{place} holds no tracking data" in done.stderr and "journal/" in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_no_argument_uses_this_processs_tracking_core_dir(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _sync(tmp_path, env={"TRACKING_CORE_DIR": str(empty)})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"{empty} holds no tracking data" in done.stderr
    assert "$TRACKING_CORE_DIR" in done.stderr  # says which setting named it
    # without it: ./tracking-runs of the working directory
    (tmp_path / "tracking-runs" / "runs").mkdir(parents=True)
    done = _sync(tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "nothing left to deliver under tracking-runs" in done.stdout


@pytest.mark.parametrize("kept", ["runs", "journal"])
def test_a_tracking_directory_with_nothing_left_to_deliver(tmp_path: Path, kept: str) -> None:
    (tmp_path / "td" / kept).mkdir(parents=True)
    done = _sync(tmp_path, str(tmp_path / "td"))
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "synced 0 values from 0 journal(s)" in done.stdout and "nothing left to deliver" in done.stdout
    assert done.stderr == ""


WRITER = JOBS / "sync_exit_writer.py"

PRIMARY = JOBS / "sync_exit_primary.py"


@pytest.mark.slow
def test_sync_on_the_node_with_its_own_settings_delivers_its_leftovers_once(
    mlflow_server: MlflowServer,
    tmp_path: Path,
    simulated_nodes: list[SimulatedNode],  # noqa: F811 - the fixture
) -> None:
    """node1's critic wrote before the driver had opened the run (so its journal kept every
    value), then its process ended; the driver, on node0, ran and finished. ``tracking-core
    sync`` on node1, with no argument and node1's own $TRACKING_CORE_DIR, delivers them into
    the job's run; a second sync finds nothing left."""
    run_id = f"job-{uuid.uuid4().hex[:10]}"
    same = {
        "TRACKING_CORE_RUN_ID": run_id,
        "TRACKING_CORE_BACKENDS": "mlflow",
        "MLFLOW_TRACKING_URI": mlflow_server.uri,
        "MLFLOW_EXPERIMENT_NAME": "node-sync",
    }
    node0, node1 = (SimulatedNode(name, tmp_path / "nodes", env=same) for name in ("node0", "node1"))
    simulated_nodes.extend([node0, node1])
    wrote = node1.run([sys.executable, str(WRITER)], env={"TRACKING_CORE_EXIT_TIMEOUT": "0"}, label="writer")
    assert wrote.returncode == 0 and "not drained" in wrote.stdout, wrote.stdout[-4000:]
    left = Path(wrote.stdout.split("LEFT ", 1)[1].split()[0])
    assert left.is_relative_to(node1.tracking_dir / "journal") and (left / "meta.json").is_file()
    ran = node0.run([sys.executable, str(PRIMARY)], label="primary")
    assert ran.returncode == 0 and f"DONE {run_id} True" in ran.stdout, ran.stdout[-4000:]
    mlrun = the_run(mlflow_server.uri, run_id)
    assert steps_of(mlflow_server.uri, mlrun.info.run_id, "critic/loss") == []

    sync = [sys.executable, "-c", CLI, "sync", "--quiet"]
    first = node1.run(sync, label="sync")
    assert first.returncode == 0, first.stdout[-4000:]
    assert f"under {node1.tracking_dir}" in first.stdout and "1 complete journal(s) removed" in first.stdout
    assert not left.exists()
    again = node1.run(sync, label="sync-again")
    assert again.returncode == 0 and "nothing left to deliver" in again.stdout, again.stdout[-4000:]

    mlrun = the_run(mlflow_server.uri, run_id)  # still one run, every value once
    assert steps_of(mlflow_server.uri, mlrun.info.run_id, "critic/loss") == [0, 1, 2]
    assert steps_of(mlflow_server.uri, mlrun.info.run_id, "loss") == [0]
    assert mlrun.data.params["critic/critic_lr"] == "0.25" and mlrun.data.params["lr"] == "0.5"
    assert mlrun.info.status == "FINISHED"
    handle = json.loads((node1.tracking_dir / "runs" / run_id / "handle.json").read_text())
    assert handle["host"] == "node1" and handle["tracking_dir"] == str(node1.tracking_dir)


@pytest.mark.parametrize("value", ["inf", "1e308", "nan", "-1", "0", "abc", "604801"])
def test_a_timeout_sync_cannot_keep_is_one_line_and_exit_2(tmp_path: Path, value: str) -> None:
    """``--timeout`` takes a number of seconds sync can wait: more than 0, at most a week. Anything
    else (infinite, too large to wait for, not a number, never enough) is said on one line that
    names the option, the value and what it takes, before anything is touched."""
    (tmp_path / "td" / "runs").mkdir(parents=True)
    done = _sync(tmp_path, f"--timeout={value}", str(tmp_path / "td"))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1, (done.stdout, done.stderr)
    assert f"--timeout {value}" in done.stderr and "604800" in done.stderr, done.stderr


@pytest.mark.parametrize("value", ["0.5", "300", "604800"])
def test_a_timeout_sync_can_keep_is_taken(tmp_path: Path, value: str) -> None:
    (tmp_path / "td" / "runs").mkdir(parents=True)
    done = _sync(tmp_path, "--timeout", value, str(tmp_path / "td"))
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "nothing left to deliver" in done.stdout and done.stderr == ""
