"""What a follower needs to deliver one writer's records, as plain data.

A :class:`Plan` is built in the training process from already converted values (never the host's
``args``: only JSON crosses to a delivery process), sent to the delivery process as one JSON line,
and handed whole to a :class:`~tracking_core.delivery.follower.Follower` there, on a thread, or
by ``tracking-core sync`` from a journal's ``meta.json``.

``left_out`` names backends of the journal this follower does not deliver (with why: one that
crashed the delivery process too often), which still count for its completion. ``replay`` marks
the plan of a process that ``tracking-core sync`` starts to deliver one backend of a journal
whose lock the sync holds: it reports its progress instead of saving it, and the sync decides
about the journal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..context import RunContext


def plain(value: Any) -> Any:
    """``value`` as JSON data: what JSON cannot hold becomes its ``str`` (never raises)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError, RecursionError):
        return str(value)


def context_to_dict(context: RunContext) -> dict[str, Any]:
    return {
        "backend": context.backend,
        "run_id": context.run_id,
        "name": context.name,
        "primary": context.primary,
        "tracking_dir": str(context.tracking_dir),
        "role": context.role,
        "label": context.label,
        "rank": context.rank,
        "options": plain(dict(context.options)),
        "tags": plain(dict(context.tags)),
        "resume": context.resume,
        "started_at": context.started_at,
        "pid": context.pid,
    }


def context_from_dict(data: Mapping[str, Any]) -> RunContext:
    values = dict(data)
    values["tracking_dir"] = Path(values["tracking_dir"])
    return RunContext(**values)


@dataclass
class BackendPlan:
    """``pending``: the primary had not opened the run in this backend when the plan was made;
    an attaching worker then looks for the open result in the saved run handle first.
    ``writer``: the journal's writer as the job's writer registry knows it (see
    :mod:`.writers`), when this delivery replays the journal of a writer that is gone (it
    publishes only the writer's final state); None: the writer is this delivery's own."""

    name: str
    context: dict[str, Any]
    action: str
    entry: dict[str, Any]
    pending: bool = False
    writer: dict[str, Any] | None = None


@dataclass
class Plan:
    folder: str | None
    prefix: str
    backends: list[BackendPlan] = field(default_factory=list)
    poll: float = 0.5
    exit_timeout: float = 30.0
    handle_file: str | None = None
    left_out: dict[str, str] = field(default_factory=dict)
    replay: bool = False
    #: a backend writes to the training process's terminal (``register(..., terminal=True)``)
    terminal: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        values = dict(data)
        values["backends"] = [BackendPlan(**b) for b in values.get("backends") or []]
        return cls(**values)
