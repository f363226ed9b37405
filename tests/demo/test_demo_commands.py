"""The commands the demo prints run as printed, from another directory, without the project's
virtual environment on PATH; the console's step numbers are the trackers'."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers.demo_run import DemoRun, demo_run  # noqa: F401 - shared fixture
from tests.helpers.tb_events import read_logdir


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_printed_commands_run_as_printed(demo_run: DemoRun) -> None:  # noqa: F811
    """The shared demo run (tests/helpers/demo_run.py): started from a directory of the user's,
    without the venv's bin on PATH; its printed commands are run the same way."""
    env, tmp_path, out, steps = demo_run.env, demo_run.home, demo_run.stdout, demo_run.steps
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

    # one step numbering: the console says 0..steps-1, as every tracker records it
    for role in ("actor", "critic"):
        printed = [int(s) for s in re.findall(rf"^\[{role}\] step (\d+)/{steps - 1} ", out, re.M)]
        assert printed == list(range(steps)), (role, out[-2000:])
    logdir = shlex.split(commands["tensorboard"])[-1]
    tb = read_logdir(logdir)
    assert [s for s, _ in tb["actor"].scalars["train/pg_loss"]] == list(range(steps))
