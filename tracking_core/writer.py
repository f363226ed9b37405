"""Which process of a role writes: exactly one per role, found without a collective call.

In order: ``TRACKING_CORE_WRITER`` (``1``/``0``) or an explicit choice; the Megatron main rank
(data-parallel rank 0 counting context parallelism, tensor-parallel rank 0, last pipeline stage)
when ``megatron.core.parallel_state`` is already imported *and* initialised — Megatron is never
imported to find out (it costs seconds); else rank 0 of the role's ``torch.distributed`` world when
it is initialised; else ``RANK`` from the environment (0 when unset).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from . import settings

WRITER_ENV = settings.WRITER


@dataclass(frozen=True)
class WriterDecision:
    writer: bool
    rank: int | None
    reason: str


def _megatron_decision() -> WriterDecision | None:
    ps = sys.modules.get("megatron.core.parallel_state")
    if ps is None:
        return None
    try:
        if not ps.model_parallel_is_initialized():
            return None
        dp = ps.get_data_parallel_rank(with_context_parallel=True)
        tp = ps.get_tensor_model_parallel_rank()
        last = ps.is_pipeline_last_stage(ignore_virtual=True)
    except Exception:  # noqa: BLE001 - an older or partial Megatron: fall back to torch ranks
        return None
    rank = _torch_rank()
    return WriterDecision(
        dp == 0 and tp == 0 and bool(last),
        rank,
        f"megatron main rank test (dp={dp}, tp={tp}, last pipeline stage={bool(last)})",
    )


def _torch_rank() -> int | None:
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # noqa: BLE001
        return None
    return None


def env_rank() -> int:
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def decide_writer(explicit: bool | None = None) -> WriterDecision:
    """Whether this process writes for its role, and why (for the log line)."""
    rank = _torch_rank()
    if explicit is not None:
        return WriterDecision(bool(explicit), rank, "chosen by the caller")
    forced = (settings.get(WRITER_ENV) or "").lower()
    if forced in {"1", "true", "yes", "0", "false", "no"}:
        return WriterDecision(forced in {"1", "true", "yes"}, rank, f"${WRITER_ENV}={forced}")
    megatron = _megatron_decision()
    if megatron is not None:
        return megatron
    if rank is not None:
        return WriterDecision(rank == 0, rank, f"torch.distributed rank {rank}")
    rank = env_rank()
    return WriterDecision(rank == 0, rank, f"RANK={rank}")
