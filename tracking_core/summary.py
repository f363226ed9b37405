"""What ``finish`` achieved: per backend, what was delivered, rejected, and what is missing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .delivery.progress import BackendProgress
from .records import RunStatus


class _Counts(Protocol):
    @property
    def logged(self) -> int: ...

    @property
    def not_journaled(self) -> int: ...

    @property
    def skipped(self) -> Mapping[str, int]: ...

    @property
    def spilled(self) -> int: ...

    @property
    def spill_folder(self) -> str | None: ...

    @property
    def late(self) -> int: ...

    @property
    def relieved(self) -> int: ...

    @property
    def abandoned(self) -> int: ...


@dataclass
class FinishSummary:
    """``backends[name]`` holds ``delivered``, ``undelivered`` and ``rejected`` value counts,
    ``failures`` (kind -> count), ``missing_configs`` (namespaces still owed) and ``closed``.
    ``journal`` is the journal folder kept for ``tracking-core sync`` (None when complete).
    Every counter the core keeps is here, and :meth:`describe` names each that is not zero:
    ``not_journaled`` values reached delivery only in memory (neither journal could take them),
    ``spilled`` values were journaled in the spill journal ``spill`` (the journal could not take
    them), ``late`` values were logged after the run's end (ignored), ``relieved`` times a
    logging call journaled for the pump (backpressure: logging outpaced it), ``lost`` records
    were found in no journal and skipped by delivery, ``bad_lines`` journal lines were not
    records, ``dropped`` messages to the delivery process were dropped (it was stuck), it was
    started again ``restarts`` times, and ``abandoned`` artifacts were not snapshotted when the
    run ended (not delivered)."""

    status: RunStatus
    drained: bool
    logged: int = 0
    journal: str | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    not_journaled: int = 0
    spilled: int = 0
    spill: str | None = None
    late: int = 0
    relieved: int = 0
    lost: int = 0
    bad_lines: int = 0
    dropped: int = 0
    restarts: int = 0
    abandoned: int = 0
    #: times the journal folder was found deleted during the run (a cleaner) and made again
    journal_recreated: int = 0
    backends: dict[str, dict[str, Any]] = field(default_factory=dict)
    outstanding: dict[str, str] = field(default_factory=dict)
    #: other writers' journals a primary replayed at its finish and could not complete: journal
    #: folder -> what is missing where (they stay for ``tracking-core sync``)
    peers: dict[str, str] = field(default_factory=dict)
    #: writers of the job on other nodes that still owed data when this primary closed the run
    #: (label -> role, rank, host, state, journaled, delivered, owed, last_heard seconds, the
    #: ``sync`` command to run on that host, and the backends whose registry said so): the run
    #: is closed FAILED in those backends until that command completes them
    writers: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_report(cls, status: RunStatus, counts: _Counts, report: Mapping[str, Any], names: Sequence[str]) -> FinishSummary:
        outstanding = dict(report.get("outstanding") or {})
        end_n = report.get("end_n")
        summary = cls(
            status,
            drained=bool(report) and not outstanding or not names,
            logged=counts.logged,
            journal=report.get("journal") if outstanding else None,
            skipped=dict(counts.skipped),
            not_journaled=counts.not_journaled,
            spilled=counts.spilled,
            spill=counts.spill_folder,
            late=counts.late,
            relieved=counts.relieved,
            lost=int(report.get("lost") or 0),
            bad_lines=int(report.get("bad_lines") or 0),
            dropped=int(report.get("dropped") or 0),
            restarts=int(report.get("restarts") or 0),
            abandoned=counts.abandoned,
            outstanding=outstanding,
            writers={str(k): dict(v) for k, v in dict(report.get("writers") or {}).items()},
        )
        if summary.writers:
            summary.drained = False
        for name in names:
            info = dict((report.get("backends") or {}).get(name) or {})
            delivered = int(info.get("delivered", 0))
            rejected = int(info.get("rejected", 0))
            summary.backends[name] = {
                "delivered": delivered,
                "undelivered": max(0, counts.logged - delivered - rejected),
                "rejected": rejected,
                "failures": dict(info.get("failures") or {}),
                "missing_configs": list(info.get("missing_configs") or []),
                "closed": BackendProgress(n=int(info.get("n", -1))).closed(None if end_n is None else int(end_n)),
                "circuit_open": bool(info.get("circuit_open")),
                "left_out": info.get("left_out"),
            }
        return summary

    def add_peers(self, peers: Mapping[str, str]) -> None:
        """Peers' journals replayed at this finish that still lack something: the run is not
        drained while any does."""
        self.peers.update(peers)
        if peers:
            self.drained = False

    def describe(self) -> str:
        if not self.backends:
            return f"run {self.status.value}; no backends"
        parts = []
        for name, info in self.backends.items():
            if self.logged:
                text = f"{name}: {info['delivered']} of {self.logged} values delivered"
            else:  # a driver that logged only its config
                text = f"{name}: no values logged here"
            if info["rejected"]:
                text += f", {info['rejected']} rejected by the tracker (see the warnings)"
            if info["undelivered"]:
                text += f", {info['undelivered']} NOT delivered"
            if info["missing_configs"]:
                text += f", config {', '.join(info['missing_configs'])} NOT delivered"
            if not info["closed"]:
                text += ", close NOT acknowledged"
            if info.get("left_out"):
                text += f", left out of delivery: {info['left_out']}"
            if info["failures"]:
                text += ", failures: " + ", ".join(f"{k} x{v}" for k, v in info["failures"].items())
            parts.append(text)
        text = f"run {self.status.value}; " + "; ".join(parts)
        if self.skipped:
            text += f"; skipped (not a number, or unreadable): {sum(self.skipped.values())}"
        if self.spilled:
            text += f"; {self.spilled} values could not be journaled (disk) and were journaled in {self.spill}"
        if self.not_journaled:
            text += f"; {self.not_journaled} values could not be journaled anywhere and went from memory"
        if self.late:
            text += f"; {self.late} values logged after finish() began were ignored"
        if self.relieved:
            text += f"; logging outpaced the pump: logging calls journaled {self.relieved} chunk(s) themselves (backpressure)"
        if self.lost:
            text += f"; {self.lost} records were in no journal when delivered and are missing"
        if self.bad_lines:
            text += f"; {self.bad_lines} unreadable journal line(s) skipped"
        if self.dropped:
            text += f"; {self.dropped} messages to the delivery process dropped (it was stuck)"
        if self.restarts:
            text += f"; the delivery process was started again {self.restarts}x"
        if self.abandoned:
            text += f"; {self.abandoned} artifact(s) ended with the run before their snapshot and were NOT delivered"
        if self.journal_recreated:
            text += f"; the journal folder was deleted during the run and made again ({self.journal_recreated}x)"
        from .report import sync_command

        if self.journal:
            text += f"; what is missing is kept in {self.journal}: run `{sync_command(self.journal)}`"
        for journal, what in self.peers.items():
            text += f"; another writer's records NOT delivered ({what}): kept in {journal}: run `{sync_command(journal)}`"
        if self.writers:
            from .delivery.writers import owing_text

            where = ", ".join(sorted({b for info in self.writers.values() for b in info.get("backends") or []}))
            marked = (
                f"the run is marked FAILED in {where} (meant FINISHED) until"
                if self.status is RunStatus.FINISHED
                else f"the run in {where} names them until"
            )
            text += (
                f"; {len(self.writers)} other writer(s) of the job still owe data and {marked} the "
                "command given runs on their host: " + "; ".join(owing_text(info) for info in self.writers.values())
            )
        return text
