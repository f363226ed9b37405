"""docs/slime.md's stand-in recipe runs as written: its bash block, taken from the page, run from
the checkout, logs the driver's, the actor's and the critic's calls into a run outside the
checkout, and ``show`` prints them."""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.helpers.subprocess_python import python_env

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "slime.md"


def recipe() -> str:
    """The page's bash block that uses the stand-in, as a reader copies it (list indent off)."""
    blocks = re.findall(r"^( *)```bash\n(.*?)^\1```", PAGE.read_text(), re.M | re.S)
    (found,) = [textwrap.dedent(body) for _, body in blocks if "tests/slime/stand_in" in body]
    return found


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_stand_in_recipe_runs_as_written(tmp_path: Path) -> None:
    before = {p.name for p in ROOT.iterdir()}
    done = subprocess.run(
        ["bash", "-e", "-c", recipe()], cwd=ROOT, capture_output=True, text=True, timeout=500, check=False,
        env=python_env({"TMPDIR": str(tmp_path)}, drop=("TRACKING_CORE_*", "MLFLOW_*", "PYTHONPATH")),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    # the run went to a directory of its own under $TMPDIR, nothing into the checkout
    (run_line,) = [line for line in out.splitlines() if line.startswith("run ")]
    assert f" {tmp_path}/" in run_line and "/slime-try/runs/" in run_line, run_line
    assert {p.name for p in ROOT.iterdir()} - before == set()
    # the driver's, the actor's and the critic's series and configs, read back from MLflow
    for line in (
        "    rollout/raw_reward = 0.2 (step 2)",
        "    train/pg_loss = 0.166667 (step 2)",
        "    train/critic-value_loss = 0.1 (step 2)",
    ):
        assert line in out.splitlines(), out
    namespaces = re.findall(r"^  \[(\w+)\] \d+ keys", out, re.M)
    assert namespaces == ["actor", "critic", "launch"], out
