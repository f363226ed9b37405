"""Never lose, against a real `mlflow server`: a server killed and restarted mid-run, a server
down for the whole run then `tracking-core sync`, SIGTERM, an uncaught exception, SIGKILL."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.mlflow_server import MlflowServer, free_port
from tests.helpers.subprocess_python import JOBS, python_env, start_python

pytest.importorskip("mlflow")

KEYS = ("loss", "reward")


# nothing of the test process's run or MLflow settings reaches the job or `tracking-core sync`
DROP = ("TRACKING_CORE_*", "MLFLOW_*")


def _env() -> dict[str, str]:
    return python_env(drop=DROP)


def _history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    from mlflow.tracking import MlflowClient

    return sorted((m.step, m.value) for m in MlflowClient(uri).get_metric_history(run_id, key))


def _wait_for_run(uri: str, timeout: float = 60.0) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    deadline = time.monotonic() + timeout
    while not client.search_runs([e.experiment_id for e in client.search_experiments()]):
        assert time.monotonic() < deadline, f"no MLflow run within {timeout} s"
        time.sleep(0.1)


def _mlflow_run(uri: str) -> object:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 1, [r.info.run_id for r in runs]
    return runs[0]


JOB = JOBS / "never_lose_mlflow_job.py"


def _start_job(tmp: Path, uri: str, steps: int, sleep: float, end: str = "none") -> subprocess.Popen[str]:
    """JOB; ``end`` says how it ends: none, wait (for the file server-back), describe, raise."""
    return start_python(
        JOB,
        args=[tmp / "td", uri, tmp / "server-back", str(steps), str(sleep), end],
        env={"TRACKING_CORE_EXIT_TIMEOUT": "20"},
        drop=DROP,
    )


def _wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 120) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        if line.startswith(prefix):
            return
        assert time.monotonic() < deadline, f"no {prefix!r} line"
    raise AssertionError(f"process ended before printing {prefix!r}: {proc.stderr.read() if proc.stderr else ''}")


@pytest.mark.slow
def test_server_killed_and_restarted_mid_run_every_step_once(
    mlflow_server_factory: Callable[..., MlflowServer], tmp_path: Path
) -> None:
    server = mlflow_server_factory()
    # 600 steps of 50 ms, the server killed after step 100 and started again after step 200; the
    # job finishes only once the server answers again (a server still down at finish is given one
    # probe, not the whole timeout: that case is the sync test below). The server's start can take
    # longer than the job's last 400 steps on a loaded machine, hence the gate, not a clock.
    back = tmp_path / "server-back"
    proc = _start_job(tmp_path, server.uri, steps=600, sleep=0.05, end="wait")
    _wait_for_line(proc, "step 100")
    _wait_for_run(server.uri)  # mid-run: the run is open (the delivery process imports mlflow first)
    server.kill()  # SIGKILL to the server's whole process group, logging goes on
    _wait_for_line(proc, "step 200")
    server.start()  # returns once the server answers /health
    back.touch()
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert "failed in log_metrics" in err  # the outage was noticed ...
    mlrun = _mlflow_run(server.uri)
    for key in KEYS:  # ... and every step of every metric is there exactly once
        history = _history(server.uri, mlrun.info.run_id, key)
        assert [s for s, _ in history] == list(range(600)), key
    assert "train/step" not in mlrun.data.metrics  # the axis is the metrics' step, no series
    assert mlrun.info.status == "FINISHED"


@pytest.mark.slow
def test_server_down_for_the_whole_run_then_sync(tmp_path: Path) -> None:
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    proc = _start_job(tmp_path, uri, steps=50, sleep=0.0, end="describe")
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    assert time.monotonic() - started < 90  # the bound: finish's timeout + start-up
    assert re.search(r"run `\S*tracking-core sync \S+`", out)  # the command, runnable as printed

    with MlflowServer(tmp_path / "server", port=port) as server:
        sync = [sys.executable, "-m", "tracking_core.cli", "sync", str(tmp_path / "td")]
        first = subprocess.run(sync, capture_output=True, text=True, env=_env(), timeout=300)
        assert first.returncode == 0, first.stderr[-3000:]
        assert "synced 100 values" in first.stdout
        mlrun = _mlflow_run(server.uri)
        for key in KEYS:
            assert [s for s, _ in _history(server.uri, mlrun.info.run_id, key)] == list(range(50))
        assert mlrun.info.status == "FINISHED"
        second = subprocess.run(sync, capture_output=True, text=True, env=_env(), timeout=300)
        assert second.returncode == 0 and "synced 0 values" in second.stdout
        for key in KEYS:
            assert len(_history(server.uri, mlrun.info.run_id, key)) == 50


@pytest.mark.slow
def test_sigterm_drains_and_marks_killed_exception_marks_failed(
    mlflow_server_factory: Callable[..., MlflowServer], tmp_path: Path
) -> None:
    server = mlflow_server_factory()
    proc = _start_job(tmp_path / "a", server.uri, steps=100_000, sleep=0.001)
    _wait_for_line(proc, "step 500")
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM, err[-2000:]
    mlrun = _mlflow_run(server.uri)
    assert mlrun.info.status == "KILLED"
    steps = [s for s, _ in _history(server.uri, mlrun.info.run_id, "loss")]
    assert steps == list(range(len(steps))) and len(steps) > 500  # drained: no gap, no loss

    other = mlflow_server_factory()
    failing = _start_job(tmp_path / "b", other.uri, steps=20, sleep=0.0, end="raise")
    _out, err = failing.communicate(timeout=120)
    assert failing.returncode == 1 and "diverged" in err
    mlrun = _mlflow_run(other.uri)
    assert mlrun.info.status == "FAILED"
    assert len(_history(other.uri, mlrun.info.run_id, "loss")) == 20


@pytest.mark.slow
def test_sigkill_then_sync_delivers_all_but_the_last_flush_interval(
    mlflow_server_factory: Callable[..., MlflowServer], tmp_path: Path
) -> None:
    server = mlflow_server_factory()
    proc = _start_job(tmp_path, server.uri, steps=100_000, sleep=0.002)
    _wait_for_line(proc, "open")
    server.kill()  # the tracker is down: everything from now on is only in the journal
    _wait_for_line(proc, "step 600")
    killed_after = 600
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    server.start()
    sync = subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "sync", str(tmp_path / "td")],
        capture_output=True, text=True, env=_env(), timeout=300,
    )  # fmt: skip
    assert sync.returncode == 0, sync.stderr[-3000:]
    mlrun = _mlflow_run(server.uri)
    steps = [s for s, _ in _history(server.uri, mlrun.info.run_id, "loss")]
    # a gap-free prefix, up to at least the last step printed more than one flush interval
    # (0.5 s = ~200 steps at 2 ms) before the kill
    assert steps == list(range(len(steps)))
    assert len(steps) >= killed_after - 250
    assert mlrun.info.status == "KILLED"  # a primary that never finished: sync closes it KILLED
