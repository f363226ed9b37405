"""The one explicit collective: every rank of a role calls :func:`gather_role_summary`.

Attaching never makes a collective call (a host may attach on its main rank only, and a
collective there would hang). What needs every rank — the hosts and devices of all ranks, and
whether every rank runs with the same role config — is gathered here, by a call that every rank of
the role's ``torch.distributed`` world (or ``group``) must make. The writer logs the result as the
role's ``ranks`` namespace; a rank whose config differs is reported by key and rank on every rank.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("tracking_core.distributed")


def ranges(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` → ``"0-2,5,7-8"``: compact enough for thousands of ranks."""
    out: list[str] = []
    items = sorted(set(ranks))
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _device() -> str:
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            index = torch.cuda.current_device()
            return f"cuda:{index} {torch.cuda.get_device_name(index)}"
    except Exception:  # noqa: BLE001
        pass
    return "cpu"


@dataclass
class RoleSummary:
    """What the gather found: world size, hosts and devices by rank ranges, config mismatches."""

    role: str
    world_size: int
    hosts: dict[str, str] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)
    mismatches: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_config(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "hosts": self.hosts,
            "devices": self.devices,
            "config_fingerprints": self.fingerprints,
            "config_mismatches": self.mismatches,
        }


def gather_role_summary(
    run: Any, config: Any = None, *, role: str | None = None, group: Any = None
) -> RoleSummary:
    """Collective: gather every rank's host, device and config fingerprint; compare configs.

    ``config`` is this rank's view of the role config (any host object; converted and redacted
    before anything leaves the rank). Every rank of ``group`` (default: the whole world) must
    call this. Returns the same summary on every rank; the role's writer also logs it as the
    ``<role>/ranks/...`` config and every rank warns about a mismatch.
    """
    import torch.distributed as dist

    from .config import build_section

    role = role or getattr(run, "role", None) or "primary"
    values: dict[str, Any] = {}
    if config is not None:
        values = dict(build_section(config, role).values)
    digests = {key: _digest(value) for key, value in values.items()}
    mine = {
        "rank": dist.get_rank(),
        "host": socket.gethostname(),
        "device": _device(),
        "fingerprint": _digest(sorted(digests.items())),
        "digests": digests,
    }
    world = dist.get_world_size(group)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, mine, group=group)

    summary = RoleSummary(role=role, world_size=world)
    by_host: dict[str, list[int]] = {}
    by_device: dict[str, list[int]] = {}
    by_fingerprint: dict[str, list[int]] = {}
    for item in gathered:
        by_host.setdefault(item["host"], []).append(item["rank"])
        by_device.setdefault(item["device"], []).append(item["rank"])
        by_fingerprint.setdefault(item["fingerprint"], []).append(item["rank"])
    summary.hosts = {host: ranges(r) for host, r in sorted(by_host.items())}
    summary.devices = {dev: ranges(r) for dev, r in sorted(by_device.items())}
    summary.fingerprints = {fp: ranges(r) for fp, r in sorted(by_fingerprint.items())}

    if len(by_fingerprint) > 1:
        keys = sorted({k for item in gathered for k in item["digests"]})
        differing = [
            k for k in keys if len({item["digests"].get(k) for item in gathered}) > 1
        ]
        # Second round, only for the differing keys: their (redacted) values, by rank.
        mine_values = {k: values.get(k, "<absent>") for k in differing}
        values_by_rank: list[Any] = [None] * world
        dist.all_gather_object(values_by_rank, (mine["rank"], mine_values), group=group)
        for key in differing:
            groups: dict[str, tuple[Any, list[int]]] = {}
            for rank, vals in values_by_rank:
                value = vals[key]
                groups.setdefault(_digest(value), (value, []))[1].append(rank)
            summary.mismatches[key] = {
                ranges(r): value for value, r in sorted(groups.values(), key=lambda g: g[1])
            }
        log.warning(
            "role %r: ranks run with different configs: %s",
            role,
            "; ".join(
                f"{key}: " + ", ".join(f"ranks {r} = {v!r}" for r, v in by.items())
                for key, by in summary.mismatches.items()
            ),
        )
    if getattr(run, "is_writer", False):
        ranks = {f"ranks/{key}": value for key, value in summary.as_config().items()}
        run.log_config(ranks, role=role, namespace=f"{role}-ranks")
    return summary
