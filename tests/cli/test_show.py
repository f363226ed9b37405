"""``tracking-core show RUN`` for a run logged to MLflow and TensorBoard (no jsonl): which
trackers hold the run and where, each tracker's last values read back with its own reader, and
the configs per namespace."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.saved_run import LAST, make_saved_run, mlflow_run_of
from tests.helpers.subprocess_python import python_env
from tracking_core.handle import RunHandle


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> RunHandle:
    return make_saved_run(tmp_path_factory.mktemp("show"), "mlflow,tensorboard")


def _show(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "show", *args],
        capture_output=True, text=True, timeout=180, cwd=cwd, check=False,
        env=python_env(drop=("TRACKING_CORE_*", "MLFLOW_*")),
    )  # fmt: skip


def _sections(out: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"^\[(\w+)\] (.*?)(?=^\[|^configs|\Z)", out, re.M | re.S)}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.integration
def test_show_reads_mlflow_and_tensorboard(saved: RunHandle, tmp_path: Path) -> None:
    done = _show(saved.run_id[:15], "--tracking-dir", saved.tracking_dir, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith(f"run {saved.run_id} (saved-run)  {saved.run_dir}\n"), out
    assert "trackers: mlflow, tensorboard\n" in out
    sections = _sections(out)
    mlflow, tb = saved.backends["mlflow"], saved.backends["tensorboard"]
    _, mlflow_run_id = mlflow_run_of(saved)
    assert sections["mlflow"].startswith(
        f"run {mlflow_run_id} in {mlflow['tracking_uri']}  FINISHED\n"
    ), sections["mlflow"]
    for role, series in LAST.items():
        for key, value in series.items():
            assert f"    {role}/{key} = {value:.6g} (step 2)\n" in sections["mlflow"], sections["mlflow"]
            # TensorBoard: the role is the run directory, the tag is unprefixed
            assert f"    {role}: {key} = {value:.6g} (step 2)\n" in sections["tensorboard"]
    assert sections["tensorboard"].startswith(f"{tb['logdir']}\n  TensorBoard runs: actor, critic, launch\n")
    configs = out[out.index("configs, per namespace"):]
    for namespace, lr in (("launch", 0.001), ("actor", 0.002), ("critic", 0.01)):
        block = configs.split(f"[{namespace}]", 1)[1].split("[", 1)[0]
        assert f"    lr = {json.dumps(lr)}\n" in block, (namespace, block)
    assert "    kl_coef = 0\n" in configs.split("[critic]", 1)[1]  # the type kept: 0, not 0.0


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.integration
def test_show_reports_an_unreadable_tracker_and_reads_the_others(saved: RunHandle, tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / saved.run_id
    shutil.copytree(saved.run_dir, run_dir)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    data = json.loads((run_dir / "handle.json").read_text())
    data["tracking_dir"] = str(tmp_path)
    data["backends"]["mlflow"]["tracking_uri"] = f"http://127.0.0.1:{port}"
    (run_dir / "handle.json").write_text(json.dumps(data))
    done = _show(str(run_dir), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    sections = _sections(done.stdout)
    assert "cannot read it: " in sections["mlflow"] and str(port) in sections["mlflow"]
    assert "critic: train/value_loss" in sections["tensorboard"]


def test_show_of_an_unknown_run_is_one_line(tmp_path: Path) -> None:
    done = _show("nope", "--tracking-dir", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"tracking-core show: no saved run 'nope' (a run directory or run id); no saved runs under {tmp_path / 'runs'}"
    ]
