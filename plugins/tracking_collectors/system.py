"""The facts the built-in collector gathers, each a small function returning flat keys."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import Any

#: Environment variables worth knowing about a run; credentials are never on this list.
ENV_WHITELIST = (
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_NNODES",
    "SLURM_PROCID",
    "PBS_JOBID",
    "LSB_JOBID",
    "KUBERNETES_POD_NAME",
    "RAY_JOB_ID",
    "TORCHELASTIC_RUN_ID",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "CUDA_VISIBLE_DEVICES",
    "NCCL_DEBUG",
    "OMP_NUM_THREADS",
)

#: Distributions whose versions matter for reproducing a run.
VERSIONED = ("torch", "megatron-core", "wandb", "mlflow", "tensorboardX", "ray", "tracking-core")


def parallel_layout() -> dict[str, Any]:
    """World size and parallel sizes, from what the process already initialised."""
    out: dict[str, Any] = {"parallel/host": socket.gethostname()}
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            out["parallel/world_size"] = dist.get_world_size()
            out["parallel/rank"] = dist.get_rank()
            out["parallel/backend"] = str(dist.get_backend())
    except Exception:  # noqa: BLE001
        pass
    out.update(megatron_layout())
    out["parallel/device"] = _device()
    return out


def megatron_layout() -> dict[str, Any]:
    """Megatron's parallel sizes, when its parallel state is already imported and initialised
    (Megatron is never imported here: that costs seconds)."""
    out: dict[str, Any] = {}
    ps = sys.modules.get("megatron.core.parallel_state")
    try:
        if ps is not None and ps.model_parallel_is_initialized():
            out["parallel/tp"] = ps.get_tensor_model_parallel_world_size()
            out["parallel/pp"] = ps.get_pipeline_model_parallel_world_size()
            out["parallel/dp"] = ps.get_data_parallel_world_size()
            out["parallel/cp"] = ps.get_context_parallel_world_size()
            out["parallel/ep"] = ps.get_expert_model_parallel_world_size()
    except Exception:  # noqa: BLE001 - an older Megatron without one of the getters
        pass
    return out


def _device() -> str:
    torch = sys.modules.get("torch")
    if torch is None:
        return "cpu"
    try:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            index = torch.cuda.current_device()
            return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    except Exception:  # noqa: BLE001
        pass
    return "cpu"


def env_vars() -> dict[str, Any]:
    return {f"env/{name}": os.environ[name] for name in ENV_WHITELIST if name in os.environ}


def _git(cwd: str | None, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=True
    ).stdout.strip()


def git_state(cwd: str | None = None) -> dict[str, Any]:
    """The commit of the working tree the process runs in, and whether it has local changes."""
    try:
        commit = _git(cwd, "rev-parse", "HEAD")
        dirty = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"git/commit": commit, "git/dirty": bool(dirty)}


def versions() -> dict[str, Any]:
    from importlib import metadata  # imported by the collector, not by every plugin load

    out: dict[str, Any] = {"version/python": sys.version.split()[0]}
    for dist in VERSIONED:
        try:
            out[f"version/{dist}"] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out
