"""The commands the demo prints run as printed, from another directory, without the project's
virtual environment on PATH; the console's step numbers are the trackers'."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.tb_events import read_logdir
from tests.helpers.wandb_offline import W_VARS, offline_env

STEPS = 2
BIN = str(Path(sys.executable).parent)


def _bare_path_env(tmp_path: Path) -> dict[str, str]:
    """A user's shell: the venv's bin not on PATH, no tracking variables."""
    env = {k: v for k, v in os.environ.items() if k not in W_VARS and not k.startswith(("TRACKING_CORE_", "MLFLOW_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != Path(BIN))
    env.update(offline_env(tmp_path))
    env.pop("WANDB_DIR")
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_printed_commands_run_as_printed(tmp_path: Path) -> None:
    env = _bare_path_env(tmp_path)
    user_dir = tmp_path / "elsewhere"
    user_dir.mkdir()
    demo = subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "demo", "--steps", str(STEPS),
         "--tracking-backends", "mlflow,tensorboard,wandb"],
        capture_output=True, text=True, env=env, cwd=user_dir, timeout=800,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    out = demo.stdout
    where = out[out.index("Where the run is:") : out.index("Actor vs critic")]
    commands = {
        "ui": re.search(r"open it: (.+? ui \S+)", where).group(1),
        "mlflow": re.search(r"MLflow run .*?: (.+? ui --backend-store-uri \S+)", where).group(1),
        "tensorboard": re.search(r"TensorBoard: (.+? --logdir \S+)", where).group(1),
        "wandb": re.search(r"upload it with (.+? sync \S+)", where).group(1),
        "show": re.search(r"summary: (.+? show \S+)", where).group(1),
    }
    # every tool is named so that it runs here: this PATH does not have the venv's bin
    for name, command in commands.items():
        tool = shlex.split(command)[0]
        assert os.access(tool, os.X_OK) and Path(tool).is_absolute(), (name, command)

    def run(command: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command + "".join(f" {shlex.quote(e)}" for e in extra)],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False,
        )  # fmt: skip

    ui = run(commands["ui"], "--dry-run")
    assert ui.returncode == 0 and "mlflow: " in ui.stdout and "tensorboard: " in ui.stdout, ui.stderr
    shown = run(commands["show"])
    assert shown.returncode == 0, shown.stderr
    assert "[mlflow] run " in shown.stdout and "FINISHED" in shown.stdout
    assert "actor: train/pg_loss = " in shown.stdout
    # W&B offline, read with wandb's own reader: every writer's directory, their summaries
    wandb_part = shown.stdout.split("\n[wandb] ", 1)[1].split("\n[", 1)[0]
    assert re.match(r"offline run \S+ under \S+/wandb  finished\n  [3-9] offline run directories", wandb_part), wandb_part
    assert "    actor/train/pg_loss = " in wandb_part and "    critic/train/value_loss = " in wandb_part
    for tool in ("mlflow", "tensorboard"):
        assert run(commands[tool], "--help").returncode == 0, commands[tool]

    # W&B: the printed sync command names every offline directory of the run, as W&B sees it
    # (--dry-run lists what it would upload, offline)
    run_id = re.search(r"W&B offline run (\S+):", where).group(1)
    dirs = sorted((tmp_path / "elsewhere" / "tracking-runs" / "wandb").glob(f"offline-run-*-{run_id}*"))
    assert len(dirs) >= 3, dirs  # the driver's and each role writer's
    dry = run(commands["wandb"].replace(" sync ", " sync --dry-run ", 1))
    assert dry.returncode == 0, dry.stdout + dry.stderr
    text = dry.stdout + dry.stderr
    assert f"Would sync {len(dirs)} run(s)" in text, text
    for d in dirs:
        assert d.name in text, (d.name, text)

    # one step numbering: the console says 0..STEPS-1, as every tracker records it
    for role in ("actor", "critic"):
        printed = [int(s) for s in re.findall(rf"^\[{role}\] step (\d+)/{STEPS - 1} ", out, re.M)]
        assert printed == list(range(STEPS)), (role, out[-2000:])
    logdir = shlex.split(commands["tensorboard"])[-1]
    tb = read_logdir(logdir)
    assert [s for s, _ in tb["actor"].scalars["train/pg_loss"]] == list(range(STEPS))
