"""The README's own install line, as a user runs it, then ``tracking-core demo`` from another
directory: in a fresh virtual environment whose torch stands for the user's own (the CPU build
this test environment runs on, installed first), ``pip install ".[mlflow,wandb]"`` in a copy of
the checkout, exactly as the README writes it. That install has no ``demo`` extra: the demo says
so in one line, with the command that adds it, and exits non-zero, before any run is opened (no
"run FINISHED" for a run that failed); after that command the demo runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.install.test_wheel import SKIP, Venv, _pip

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
#: The demo, as small as it runs: one step, one rank per role.
SMALL_DEMO = "tracking-core demo --steps 1 --actor-ranks 1 --critic-ranks 1"


def readme_install_line() -> str:
    """The README's first install line of tracking-core from the checkout (``pip install ".[...]"``)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Install into your own environment", 1)[1].split("\n## ", 1)[0]
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if command.startswith('pip install ".'):
                return command
    raise AssertionError("the README's install section has no `pip install \".[...]\"` line")


def _shell(venv: Venv, command: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``command`` in a shell with ``venv`` activated (its ``pip`` and ``tracking-core`` first on PATH)."""
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=venv.env(PIP_NO_COMPILE="1"),
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_the_readmes_install_then_the_demo(tmp_path: Path) -> None:
    source = tmp_path / "tracking-core"
    shutil.copytree(ROOT, source, ignore=SKIP)  # the user's checkout (building writes into it)
    root = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    _pip(root / "bin" / "python", "install", "--no-compile", f"torch=={version('torch')}", cwd=tmp_path)
    venv = Venv(root, tmp_path / "job")
    venv.outside.mkdir()

    line = readme_install_line()
    installed = _shell(venv, line, source, timeout=900)
    assert installed.returncode == 0, f"{line}\n{installed.stdout[-3000:]}\n{installed.stderr[-3000:]}"

    demo = _shell(venv, SMALL_DEMO, venv.outside, timeout=400)
    said = [text for text in (demo.stdout + demo.stderr).splitlines() if text.strip()]
    if demo.returncode == 0:  # the documented install runs the demo
        assert "run FINISHED" in demo.stdout + demo.stderr and "FAILED" not in demo.stdout + demo.stderr
        return
    assert len(said) == 1, "\n".join(said[:40])
    assert "tracking-core[demo]" in said[0] and "megatron-core" in said[0], said[0]
    assert not (venv.outside / "tracking-runs").exists()  # no run was opened
    # The command it names, run as printed (in the user's environment, from anywhere), adds
    # what the demo lacks and keeps the user's torch; then the demo runs.
    command = re.search(r"pip install \"[^\"]+\"", said[0])
    assert command is not None, said[0]
    added = _shell(venv, command.group(0), venv.outside, timeout=900)
    assert added.returncode == 0, f"{command.group(0)}\n{added.stdout[-3000:]}\n{added.stderr[-3000:]}"
    torch = _shell(venv, "python -c 'import torch; print(torch.__version__)'", venv.outside, timeout=120)
    assert torch.stdout.strip() == version("torch")
    demo = _shell(venv, SMALL_DEMO, venv.outside, timeout=400)
    assert demo.returncode == 0, f"{demo.stdout[-3000:]}\n{demo.stderr[-6000:]}"
    assert "run FINISHED" in demo.stdout and "FAILED" not in demo.stdout + demo.stderr, demo.stdout
