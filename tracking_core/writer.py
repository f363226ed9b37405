"""Which process of a role writes: exactly one per role, found without a collective call.

In order: ``TRACKING_CORE_WRITER`` (``1``/``0``) or an explicit choice; rank 0 of the group of
the role's ranks when the caller names one (``attach(group=...)``: one world split into roles);
the Megatron main rank (data-parallel rank 0 counting context parallelism, tensor-parallel rank 0,
last pipeline stage) when ``megatron.core.parallel_state`` is already imported *and* initialised —
Megatron is never imported to find out (it costs seconds); else rank 0 of the role's
``torch.distributed`` world when it is initialised; else ``RANK`` from the environment (0 when
unset). Only the world rule can leave a role without a writer (its ranks are not the world's rank
0): :attr:`WriterDecision.by_world` says that it chose, so that attach can check.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from . import settings

WRITER_ENV = settings.WRITER
#: The role of each node's system-metrics sampler (:mod:`tracking_core.system_metrics`): one
#: writer per node, never the world's rank 0 role.
SYSTEM_ROLE = "system"


@dataclass(frozen=True)
class WriterDecision:
    writer: bool
    rank: int | None
    reason: str
    #: chosen by the world rule (the world's rank 0 writes), which is right only where the
    #: world's rank 0 attaches with the same role
    by_world: bool = False


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


def _group_decision(group: Any, rank: int | None, role: str) -> WriterDecision:
    """Rank 0 of ``group`` writes (``dist.get_rank(group)``: no collective). A process outside
    the group, or without an initialised ``torch.distributed``, is the caller's mistake."""
    if rank is None:
        raise ValueError(
            f"attach(role={role!r}, group=...): torch.distributed is not initialised in this "
            "process; call torch.distributed.init_process_group() before attach, or leave group out"
        )
    dist = sys.modules["torch.distributed"]
    try:
        in_group = int(dist.get_rank(group))
    except Exception as exc:  # noqa: BLE001 - not a process group: say so with what it was
        raise ValueError(
            f"attach(role={role!r}, group={group!r}): not a torch.distributed process group "
            f"({type(exc).__name__}: {exc}); pass the group of the role's ranks (dist.new_group(ranks))"
        ) from exc
    if in_group < 0:
        raise ValueError(
            f"attach(role={role!r}, group=...): this process (torch.distributed rank {rank}) is "
            f"not in the group it was given; pass each rank the group of the ranks of its own role "
            "(every rank creates every group with dist.new_group, each then attaches with its own)"
        )
    return WriterDecision(in_group == 0, rank, f"rank {in_group} of the role's group (torch.distributed rank {rank})")


def decide_writer(explicit: bool | None = None, group: Any = None, role: str = "") -> WriterDecision:
    """Whether this process writes for its role, and why (for the log line). ``group``: the
    torch.distributed group of the role's ranks (a ``ValueError`` if this process is not in it)."""
    rank = _torch_rank()
    if explicit is not None:
        return WriterDecision(bool(explicit), rank, "chosen by the caller")
    forced = (settings.get(WRITER_ENV) or "").lower()
    if forced in {"1", "true", "yes", "0", "false", "no"}:
        return WriterDecision(forced in {"1", "true", "yes"}, rank, f"${WRITER_ENV}={forced}")
    if group is not None:
        return _group_decision(group, rank, role)
    megatron = _megatron_decision()
    if megatron is not None:
        return megatron
    if rank is not None:
        return WriterDecision(rank == 0, rank, f"torch.distributed rank {rank}", by_world=True)
    rank = env_rank()
    return WriterDecision(rank == 0, rank, f"RANK={rank}")
