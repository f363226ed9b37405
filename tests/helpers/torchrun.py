"""A local torchrun world of a worker script, as the distributed tests start it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def job_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This environment without the test process's tracking and MLflow settings, the checkout
    and its plugins importable, one thread per rank, the tracking directory under ``tmp_path``;
    ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKING_CORE_", "MLFLOW_"))}
    env.update(
        PYTHONPATH=f"{ROOT}:{ROOT / 'plugins'}",
        OMP_NUM_THREADS="1",
        TRACKING_CORE_DIR=str(tmp_path / "tracking"),
        **extra,
    )
    return env


def torchrun(worker: str | os.PathLike[str], ranks: int, cwd: Path, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``ranks`` local ranks of ``worker`` (torchrun --standalone), waited for."""
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", str(worker)],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
