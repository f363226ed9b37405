"""The pipeline, and each tracker's shaping rules in its plugin, import no tracker (nor torch,
numpy, OmegaConf, pydantic), at import or call time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.subprocess_python import JOBS

ROOT = Path(__file__).resolve().parents[2]
JOB = JOBS / "config_imports_pipeline.py"

HEAVY = [
    "mlflow",
    "wandb",
    "tensorboardX",
    "tensorboard",
    "torch",
    "numpy",
    "megatron",
    "ray",
    "omegaconf",
    "pydantic",
    "yaml",
]


def test_no_heavy_imports() -> None:
    result = subprocess.run(
        [sys.executable, str(JOB), str(ROOT / "tests/fixtures/slime_ppo_args.json")],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    new = json.loads(result.stdout.strip().splitlines()[-1])
    assert not set(new) & set(HEAVY), new
