"""One ``tracking-core demo`` run with MLflow, TensorBoard and W&B offline, shared by the tests
that only read what it printed and wrote (tests/demo): started as a user starts it, from a
directory of their own (its data goes to ./tracking-runs there), in a shell whose PATH does not
have the virtual environment's bin, with no tracking variables set.

A test module makes the fixture available with
``from tests.helpers.demo_run import DemoRun, demo_run  # noqa: F401``; every module that does
gets the same run (it is made once per test process).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.wandb_offline import W_VARS, offline_env

#: The demo's steps: the console and every tracker count 0..STEPS-1.
STEPS = 3
#: The bin directory of the virtual environment under test (not on the user's PATH).
BIN = str(Path(sys.executable).parent)


def bare_path_env(home: Path) -> dict[str, str]:
    """A user's shell: the venv's bin not on PATH, no tracking variables, W&B offline with its
    files under ``home``."""
    env = {k: v for k, v in os.environ.items() if k not in W_VARS and not k.startswith(("TRACKING_CORE_", "MLFLOW_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != Path(BIN))
    env.update(offline_env(home))
    env.pop("WANDB_DIR")  # W&B's runs go under the tracking directory, as they do by default
    env.pop("VIRTUAL_ENV", None)
    return env


@dataclass(frozen=True)
class DemoRun:
    """The finished demo: what it printed, and where the user ran it."""

    proc: subprocess.CompletedProcess[str]
    home: Path  # the user's shell's directory (W&B's cache and config are here)
    cwd: Path  # where the demo ran: ``home / "elsewhere"``
    env: dict[str, str]  # the user's shell's environment
    steps: int = STEPS

    @property
    def out_dir(self) -> Path:
        """The tracking directory: ./tracking-runs where the demo ran."""
        return self.cwd / "tracking-runs"

    @property
    def stdout(self) -> str:
        return self.proc.stdout


_RUN: DemoRun | None = None


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The demo, run once per test process (its tests form one pytest-xdist group)."""
    global _RUN
    if _RUN is None:
        home = tmp_path_factory.mktemp("demo-user")
        cwd = home / "elsewhere"
        cwd.mkdir()
        env = bare_path_env(home)
        proc = subprocess.run(
            [sys.executable, "-m", "tracking_core.cli", "demo", "--steps", str(STEPS),
             "--tracking-backends", "mlflow,tensorboard,wandb"],
            capture_output=True, text=True, env=env, cwd=cwd, timeout=800,
        )  # fmt: skip
        _RUN = DemoRun(proc, home, cwd, env)
    assert _RUN.proc.returncode == 0, _RUN.proc.stdout[-3000:] + _RUN.proc.stderr[-3000:]
    return _RUN
