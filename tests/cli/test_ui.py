"""``tracking-core ui RUN`` starts the MLflow UI on the run's store and TensorBoard on its log
directory, prints URLs that answer with this run's data, and stops both on Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers.saved_run import make_saved_run, mlflow_run_of
from tests.helpers.subprocess_python import python_env
from tracking_core.handle import RunHandle
from tracking_core.viewers import serve
from tracking_core.views import Viewer


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200, url
        return bytes(response.read())


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> RunHandle:
    return make_saved_run(tmp_path_factory.mktemp("ui"), "mlflow,tensorboard,jsonl")


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.integration
def test_ui_serves_the_runs_trackers_and_stops_them(saved: RunHandle, tmp_path: Path) -> None:
    mlflow_port, tb_port = _free_port(), _free_port()
    # stderr to a file (shown when the test fails), not a pipe nobody reads while they run.
    err_path = tmp_path / "ui.stderr"
    err = err_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracking_core.cli", "ui", str(saved.run_dir),
         "--mlflow-port", str(mlflow_port), "--tensorboard-port", str(tb_port)],
        stdout=subprocess.PIPE, stderr=err, text=True,
        env=python_env({"PYTHONFAULTHANDLER": "1"}, drop=("TRACKING_CORE_*", "MLFLOW_*")),
        cwd=tmp_path,  # from anywhere
        # As a process started in the background of a script is: SIGINT ignored. Ctrl-C must
        # stop it all the same (Python raises no KeyboardInterrupt then: ui handles SIGINT).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    err.close()
    urls: dict[str, str] = {}
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 180
        said = []  # the lines that are neither the run, a URL nor the last one
        for line in proc.stdout:
            tracker, _, rest = line.partition(": ")
            if tracker in ("mlflow", "tensorboard"):
                urls[tracker] = rest.split()[0]
            elif tracker in saved.backends:  # a tracker with nothing to start: where to look
                pass
            elif not line.startswith(("run ", "Ctrl-C stops them")):
                said.append(line.rstrip("\n"))
            if line.startswith("Ctrl-C stops them") or time.monotonic() > deadline:
                break
        assert set(urls) == {"mlflow", "tensorboard"}, (urls, proc.poll())
        experiment_id, run_id = mlflow_run_of(saved)
        # the run's metric charts (the run page's "model-metrics" tab), not the experiment
        assert urls["mlflow"] == (
            f"http://127.0.0.1:{mlflow_port}/#/experiments/{experiment_id}/runs/{run_id}/model-metrics"
        )
        # the UI serves this run's store: its REST API knows the run and its metrics
        api = f"http://127.0.0.1:{mlflow_port}/api/2.0/mlflow/runs/get?run_id={run_id}"
        run = json.loads(_get(api))["run"]
        assert {m["key"] for m in run["data"]["metrics"]} >= {"actor/train/pg_loss"}
        assert "<html" in _get(urls["mlflow"].split("#")[0]).decode().lower()
        # TensorBoard serves this run's log dir: one TensorBoard run per role
        assert urls["tensorboard"] == f"http://127.0.0.1:{tb_port}/"
        runs = json.loads(_get(f"{urls['tensorboard']}data/runs"))
        assert {"actor", "critic", "launch"} <= set(runs), runs
        # more pages, as a user opens them: the viewers' own lines (access logs, notes,
        # warnings) go to their logs, said once on stdout, none to the terminal
        for page in ("", "static-files/", "ajax-api/2.0/mlflow/experiments/search?max_results=10"):
            with contextlib.suppress(urllib.error.HTTPError):
                _get(f"http://127.0.0.1:{mlflow_port}/{page}")
        _get(f"{urls['tensorboard']}data/plugins_listing")
        time.sleep(1.0)
        assert err_path.read_text() == "", err_path.read_text()[-3000:]
        logs = saved.run_dir / "ui-logs"
        assert said == [f"the viewers' logs: {logs}"], said
        assert "GET /api/2.0/mlflow/runs/get" in (logs / "mlflow.log").read_text()
        assert "TensorBoard" in (logs / "tensorboard.log").read_text()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # the fault handler prints where every thread is
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
            proc.kill()
            pytest.fail(f"tracking-core ui did not stop within 60 s of Ctrl-C; its stderr:\n{err_path.read_text()[-5000:]}")
    assert code == 0, err_path.read_text()[-5000:]
    assert _refused(mlflow_port) and _refused(tb_port), "a viewer outlived tracking-core ui"


@pytest.mark.timeout(900)
def test_ui_dry_run_prints_runnable_commands(saved: RunHandle, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "ui", saved.run_id, "--dry-run",
         "--tracking-dir", saved.tracking_dir],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
        env=python_env(drop=("TRACKING_CORE_*",)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines()[1:])
    assert lines["mlflow"].startswith(f"{sys.executable} -m mlflow ui --backend-store-uri ")
    assert saved.backends["mlflow"]["tracking_uri"] in lines["mlflow"]
    assert f"--logdir {saved.backends['tensorboard']['logdir']}" in lines["tensorboard"]


def test_ui_of_an_unknown_run_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "ui", "nope", "--tracking-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"tracking-core ui: no saved run 'nope' (a run directory or run id); no saved runs under {tmp_path / 'runs'}"
    ]


@pytest.mark.timeout(900)
def test_run_sh_ui_from_another_directory(saved: RunHandle, tmp_path: Path) -> None:
    """`./run.sh ui` is `tracking-core ui` from the checkout's environment, wherever it is run."""
    root = Path(__file__).resolve().parents[2]
    env = python_env(drop=("TRACKING_CORE_*",))
    env["TRACKING_CORE_VENV"] = str(Path(sys.executable).parent.parent)  # the venv under test
    done = subprocess.run(
        ["bash", str(root / "run.sh"), "ui", "--dry-run", "--tracking-dir", saved.tracking_dir],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"run {saved.run_id} ({saved.run_dir})"  # the latest run
    assert "tensorboard: " in done.stdout and " -m mlflow ui " in done.stdout


def test_a_viewer_that_fails_is_said_with_its_log(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A viewer that exits: one message on stderr with its log's path and its last lines; its
    own output reaches the terminal only there."""
    chatter = "import sys\nfor i in range(40): print(f'viewer line {i}', file=sys.stderr if i % 2 else sys.stdout)\nsys.exit(3)"
    viewer = Viewer("fake", url="http://127.0.0.1:9/", command=[sys.executable, "-c", chatter],
                    ready="http://127.0.0.1:9/", note="fake viewer")  # fmt: skip
    code = serve([viewer], out=sys.stdout, logs=tmp_path, wait=60)
    out, err = capfd.readouterr()
    assert code == 1
    assert out == ""  # no URL: the logs are named in the message
    log = tmp_path / "fake.log"
    assert log.read_text().splitlines() == [f"viewer line {i}" for i in range(40)]
    lines = err.splitlines()
    assert lines[0] == f"tracking-core ui: the fake viewer exited with code 3; its log: {log}, ending with:"
    assert lines[1:] == [f"  viewer line {i}" for i in range(20, 40)]


def test_a_viewer_that_does_not_answer_is_said_with_its_log(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A viewer still silent on its URL after ``wait``: said with its log, and stopped."""
    quiet = "import sys, time\nprint('starting', flush=True)\nprint('no port yet', file=sys.stderr, flush=True)\ntime.sleep(60)"
    viewer = Viewer("slow", url="http://127.0.0.1:9/", command=[sys.executable, "-c", quiet],
                    ready="http://127.0.0.1:9/", note="slow viewer")  # fmt: skip
    started = time.monotonic()
    code = serve([viewer], out=sys.stdout, logs=tmp_path, wait=2)
    out, err = capfd.readouterr()
    assert code == 1 and out == "" and time.monotonic() - started < 30  # stopped, not waited for
    assert err.splitlines() == [
        f"tracking-core ui: the slow viewer did not answer within 2 s; its log: {tmp_path / 'slow.log'}, ending with:",
        "  starting",
        "  no port yet",
    ]
