"""What a run says to its user with logging left unconfigured: where it goes when it starts, its
summary at the end, an incomplete delivery as one block with the command that completes it
(runnable as printed), one tracker's repeated error said once as its cause, nothing else before
that block, and the quiet option."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.mlflow_server import MlflowServer, free_port
from tests.helpers.subprocess_python import JOBS, python_env, run_python

DROP = ("TRACKING_CORE_*", "MLFLOW_*")
BIN = Path(sys.executable).parent

# A user's script: no logging configured. The primary and an actor writer (a second delivery
# process, whose own report of the same failure reaches this process) log to MLflow.
DOWN_JOB = JOBS / "report_mlflow_down.py"


def _bare_path_env() -> dict[str, str]:
    """The user's shell: no tracking or MLflow variables, the venv's bin not on PATH."""
    env = python_env(drop=DROP)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != BIN)
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.mark.slow
def test_an_undelivered_run_ends_with_one_block_and_its_command_delivers_it(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    port = free_port()  # bound and closed: nothing listens there for the whole job
    uri = f"http://127.0.0.1:{port}"
    env = _bare_path_env()
    job = run_python(DOWN_JOB, args=[tmp_path / "td", uri], env={**env, "TRACKING_CORE_EXIT_TIMEOUT": "3"}, drop=DROP)
    err = job.stderr
    assert job.returncode == 0 and "script done" in job.stdout  # training's exit status is its own

    # One block the user cannot miss: which tracker lacks what, and the command.
    block = err[err.index("but its delivery is INCOMPLETE") :]
    assert re.search(r"^  mlflow: 0 of 15 values delivered, 2 config section\(s\) not delivered, run not closed$", block, re.M), block
    # The connection error: once, as its cause (not the client's retry text), then a count.
    assert "Max retries exceeded" not in err and err.count("backend 'mlflow' failed in") == 1, err
    assert re.search(r"mlflow failed: MlflowException: Connection refused \(127\.0\.0\.1:\d+\) \(reported \dx: attach_run, open_run\)", block), block
    command = re.search(r"once the trackers can be reached, run:\n    (.+)$", block, re.M).group(1)
    assert "tracking-core sync" in command and Path(shlex.split(command)[0]).is_absolute(), command

    # Run as printed, from a shell whose PATH lacks the venv, with the server now up.
    with MlflowServer(tmp_path / "server", port=port) as server:
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "mlflow: 15 values delivered" in done.stdout, done.stdout
        from mlflow.tracking import MlflowClient

        client = MlflowClient(server.uri)
        runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
        assert len(runs) == 1 and runs[0].info.status == "FINISHED"
        for key, n in (("loss", 5), ("reward", 5), ("actor/pg_loss", 5)):
            assert len(client.get_metric_history(runs[0].info.run_id, key)) == n, key


START_JOB = JOBS / "report_start.py"


def _start_job(tmp_path: Path, *args: str, **env: str) -> str:
    job = run_python(START_JOB, args=[tmp_path / "td", *args], env=env, drop=DROP)
    return job.stderr


def test_a_script_says_where_its_run_goes_and_how_it_ended(tmp_path: Path) -> None:
    err = _start_job(tmp_path)
    start = re.search(r"^tracking-core: run (\S+) started → jsonl\n  jsonl: (\S+)$", err, re.M)
    assert start, err
    assert Path(start.group(2)).is_dir() and str(tmp_path / "td") in start.group(2)
    assert re.search(r"^tracking-core: run FINISHED; jsonl: 6 of 6 values delivered$", err, re.M), err
    assert err.count("tracking-core: run") == 2, err  # once each, from the primary only

    # logging configured by the application: its handlers say them, once each
    err = _start_job(tmp_path, "--tracking-dir", "configured")
    assert err.count("APP tracking_core.report: tracking-core: run") == 2 and err.count("tracking-core: run") == 2, err


@pytest.mark.parametrize("how", ["option", "variable"])
def test_quiet_silences_the_start_line_and_the_summary(tmp_path: Path, how: str) -> None:
    err = _start_job(tmp_path, "--tracking-quiet") if how == "option" else _start_job(tmp_path, TRACKING_CORE_QUIET="1")
    assert "tracking-core" not in err, err


def test_the_sync_command_runs_without_a_console_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracking_core.views import sync_command

    assert shlex.split(sync_command("/x y"))[1:] == ["sync", "/x y"]
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))  # no tracking-core beside it
    assert sync_command("/d", 5) == f"{tmp_path}/bin/python -m tracking_core sync --timeout 5 /d"
    monkeypatch.undo()
    done = subprocess.run([sys.executable, "-m", "tracking_core", "sync", str(tmp_path)], capture_output=True, text=True, env=python_env(drop=DROP))
    assert done.returncode == 2 and "holds no tracking data" in done.stderr, done.stderr


def test_a_failure_cause_leaves_out_what_varies_between_calls() -> None:
    from tracking_core.delivery.failures import cause_of

    def refused(path: str) -> Exception:
        return RuntimeError(
            f"API request to http://10.0.0.5:5000{path} failed with exception HTTPConnectionPool(host='10.0.0.5', "
            f"port=5000): Max retries exceeded with url: {path} (Caused by NewConnectionError(\"HTTPConnection"
            "(host='10.0.0.5', port=5000): Failed to establish a new connection: [Errno 111] Connection refused\"))"
        )

    one = cause_of(refused("/api/2.0/mlflow/runs/log-batch"))
    assert one == "RuntimeError: Connection refused (10.0.0.5:5000)"
    assert cause_of(refused("/api/2.0/mlflow/runs/update?run_id=4f1c2a9e8b7d")) == one
    assert cause_of(ValueError("run 4f1c2a9e8b7d6c5a not found at https://host/x?y=1")) == "ValueError: run … not found at https://host"


# A driver with an actor and a critic in its process. With a gate, the job flushes, says so, and
# logs again only once the gate file exists (the test stops the server in between).
ROLES_JOB = JOBS / "report_roles.py"

#: What may come before the incomplete block, in this order: where the run goes, the cause once,
#: and, where a role's delivery process still runs at the close (its exit timeout), that it does.
BEFORE_THE_BLOCK = (
    r"tracking-core: run \S+ started → mlflow",
    r"  MLflow run tagged tracking_core\.run_id=\S+: http://127\.0\.0\.1:\d+/",
    # the first failure, whichever call met it first: a delivery (retried) or the writer's
    # publication in the registry (the next one says as much)
    r"backend 'mlflow' failed in \w+: MlflowException: Connection refused \(127\.0\.0\.1:\d+\); "
    r"training goes on, (the call is retried|no record waits for it \(the next publication says as much\)) "
    r"and further failures are only counted",
    r"closing the run while [12] writer\(s\) still deliver: (actor|critic)-r0-p\d+(, (actor|critic)-r0-p\d+)?",
)


def _lines_before_the_block(err: str) -> list[str]:
    lines = err.splitlines()
    at = next(i for i, line in enumerate(lines) if "but its delivery is INCOMPLETE" in line)
    return lines[:at]


@pytest.mark.slow
@pytest.mark.parametrize("down", ["before the start", "mid-run"])
def test_nothing_but_where_and_why_comes_before_the_incomplete_block(tmp_path: Path, down: str) -> None:
    pytest.importorskip("mlflow")
    from tests.helpers.subprocess_python import finish_python, start_python

    env = {"TRACKING_CORE_EXIT_TIMEOUT": "3"}
    gate = tmp_path / "gate"
    with MlflowServer(tmp_path / "server") as server:
        if down == "before the start":
            server.kill()
        proc = start_python(ROLES_JOB, args=[tmp_path / "td", server.uri, gate if down == "mid-run" else "-"], env=env, drop=DROP)
        if down == "mid-run":
            assert proc.stdout is not None
            flushed = proc.stdout.readline()
            assert flushed == "flushed [True, True, True]\n", flushed
            server.kill()
            gate.write_text("down\n")
        job = finish_python(proc, timeout=120)
    err = job.stderr
    before = _lines_before_the_block(err)
    assert [line for line in before if not any(re.fullmatch(p, line) for p in BEFORE_THE_BLOCK)] == [], err
    assert [bool(re.fullmatch(p, line)) for p, line in zip(BEFORE_THE_BLOCK, before, strict=False)] == [True] * len(before), err
    assert len(before) in (3, 4), err  # the start, the target, the cause once (and the late writers)
    block = err[err.index("but its delivery is INCOMPLETE") :]
    delivered, logged = (15, 30) if down == "mid-run" else (0, 15)  # flushed before it went down
    assert re.search(rf"^  mlflow: {delivered} of {logged} values delivered", block, re.M), block


# The demo's layout: a driver that logs nothing itself starts worker processes that attach (the
# run handle in their environment) and log; its end line speaks for the job. With the URI "-" it
# logs to jsonl.
DRIVER_JOB = JOBS / "report_driver.py"
WORKER = JOBS / "report_worker.py"


def test_the_drivers_end_line_counts_its_nodes_writers_for_a_tracker_without_a_registry(tmp_path: Path) -> None:
    """jsonl keeps no writer registry: the driver counts the ends its node's writers left."""
    job = run_python(DRIVER_JOB, args=[tmp_path / "td", "-", WORKER], drop=DROP, timeout=300)
    ends = [line for line in job.stderr.splitlines() if line.startswith("tracking-core: run ") and "started" not in line]
    assert ends == ["tracking-core: run FINISHED; jsonl: 240 of 240 values delivered (actor 180, critic 60; the driver logged none)"], job.stderr
    held = [json.loads(line) for path in (tmp_path / "td" / "jsonl").rglob("*.jsonl") for line in path.read_text().splitlines()]
    assert sum(1 for row in held if "value" in row) == 240, held[:5]


@pytest.mark.slow
def test_the_drivers_end_line_speaks_for_the_job(tmp_path: Path, mlflow_server: MlflowServer) -> None:
    pytest.importorskip("mlflow")
    job = run_python(DRIVER_JOB, args=[tmp_path / "td", mlflow_server.uri, WORKER], drop=DROP, timeout=300)
    err = job.stderr
    ends = [line for line in err.splitlines() if line.startswith("tracking-core: run ") and "started" not in line]
    assert ends == ["tracking-core: run FINISHED; mlflow: 240 of 240 values delivered (actor 180, critic 60; the driver logged none)"], err

    from mlflow.tracking import MlflowClient

    client = MlflowClient(mlflow_server.uri)
    run_id = job.stdout.split("RUN ")[1].split()[0]
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()], f"tags.tracking_core.run_id = '{run_id}'")
    held = sum(len(client.get_metric_history(run.info.run_id, key)) for key in run.data.metrics)
    assert held == 240, run.data.metrics
