"""What ``finish`` achieved: per backend, what was delivered, rejected, and what is missing."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .delivery.progress import BackendProgress
from .files import replace_text
from .records import RunStatus

if TYPE_CHECKING:
    from .delivery.intake import Intake


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
    #: roles whose processes attached with no writer among them, as the job's store said them to
    #: this primary (role -> what, where, and what to do): what they logged went nowhere
    roles_without_writer: dict[str, str] = field(default_factory=dict)
    #: the job's other writers as a primary's registry said them at its close (backend -> label
    #: -> their published state: role, journaled, delivered, ...): its end speaks for the job
    job: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def from_report(cls, status: RunStatus, counts: Intake, report: Mapping[str, Any], names: Sequence[str]) -> FinishSummary:
        outstanding = dict(report.get("outstanding") or {})
        end_n = report.get("end_n")
        summary = cls(
            status,
            drained=bool(report) and not outstanding or not names,
            journal=report.get("journal") if outstanding else None,
            skipped=dict(counts.skipped),
            spill=counts.spill_folder,
            outstanding=outstanding,
            writers={str(k): dict(v) for k, v in dict(report.get("writers") or {}).items()},
            job={str(k): dict(v) for k, v in dict(report.get("job") or {}).items()},
        )
        for key in ("logged", "not_journaled", "spilled", "late", "relieved", "abandoned"):
            setattr(summary, key, getattr(counts, key))
        for key in ("lost", "bad_lines", "dropped", "restarts"):
            setattr(summary, key, int(report.get(key) or 0))
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

    def add_ends(self, folder: Path, own: str) -> None:
        """The ends of this node's other writers of the run that finished before this primary
        (``folder``'s files, see :func:`save_end`): counted in each backend's line where the
        registry did not say them."""
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            try:
                end = json.loads(path.read_text())
                label, delivered = str(end["label"]), dict(end["delivered"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # one being written or damaged: this line is the primary's own
            if label == own:
                continue
            for name in self.backends:
                state = {"role": end.get("role"), "journaled": end.get("journaled"), "delivered": delivered.get(name)}
                self.job.setdefault(name, {}).setdefault(label, state)

    def _for_the_job(self, name: str, delivered: int, others: Mapping[str, Mapping[str, Any]]) -> str:
        """A primary's counts for ``name`` with those its job's other writers published: the job's
        total, then what each role delivered and what the driver (this process) did."""
        roles: dict[str, int] = {}
        logged = self.logged
        for label, state in sorted(others.items()):
            role = str(state.get("role") or label)
            roles[role] = roles.get(role, 0) + count(state.get("delivered"))
            logged += count(state.get("journaled"))
        own = f"the driver {delivered}" if self.logged else "the driver logged none"
        parts = ", ".join(f"{role} {n}" for role, n in roles.items())
        return f"{name}: {delivered + sum(roles.values())} of {logged} values delivered ({parts}; {own})"

    def describe(self, head: str | None = None) -> str:
        """One line: ``head`` (default ``run <status>``: the job's run, said by its primary),
        then each backend's counts."""
        head = head or f"run {self.status.value}"
        if not self.backends:
            return f"{head}; no backends"
        parts = []
        for name, info in self.backends.items():
            if self.job.get(name):
                text = self._for_the_job(name, info["delivered"], self.job[name])
            elif self.logged:
                text = f"{name}: {info['delivered']} of {self.logged} values delivered"
            else:  # a driver that logged only its config
                text = f"{name}: no values logged here"
            said = {**info, "closed": not info["closed"]}
            parts.append(", ".join([text, *(t.format(_said(said[k])) for k, t in _BACKEND_PARTS.items() if said.get(k))]))
        text = f"{head}; " + "; ".join(parts)
        for key, template in _SUMMARY_PARTS.items():
            if value := getattr(self, key):
                text += "; " + template.format(sum(value.values()) if key == "skipped" else value, s=self)
        from .views import sync_command

        if self.journal:
            text += f"; what is missing is kept in {self.journal}: run `{sync_command(self.journal)}`"
        for journal, what in self.peers.items():
            text += f"; another writer's records NOT delivered ({what}): kept in {journal}: run `{sync_command(journal)}`"
        for line in self.roles_without_writer.values():
            text += f"; {line}"
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


#: what :meth:`FinishSummary.describe` says of a backend's count that is not zero, in order
_BACKEND_PARTS = {
    "rejected": "{} rejected by the tracker (see the warnings)",
    "undelivered": "{} NOT delivered",
    "missing_configs": "config {} NOT delivered",
    "closed": "close NOT acknowledged",  # said when not closed
    "left_out": "left out of delivery: {}",
    "failures": "failures: {}",
}
#: ... and of the run's own counters
_SUMMARY_PARTS = {
    "skipped": "skipped (not a number, or unreadable): {}",
    "spilled": "{} values could not be journaled (disk) and were journaled in {s.spill}",
    "not_journaled": "{} values could not be journaled anywhere and went from memory",
    "late": "{} values logged after finish() began were ignored",
    "relieved": "logging outpaced the pump: logging calls journaled {} chunk(s) themselves (backpressure)",
    "lost": "{} records were in no journal when delivered and are missing",
    "bad_lines": "{} unreadable journal line(s) skipped",
    "dropped": "{} messages to the delivery process dropped (it was stuck)",
    "restarts": "the delivery process was started again {}x",
    "abandoned": "{} artifact(s) ended with the run before their snapshot and were NOT delivered",
    "journal_recreated": "the journal folder was deleted during the run and made again ({}x)",
}


def _said(value: Any) -> Any:
    """A backend's count as its line says it: a list joined, kinds with their counts."""
    if isinstance(value, list):
        return ", ".join(value)
    if isinstance(value, dict):
        return ", ".join(f"{k} x{v}" for k, v in value.items())
    return value


#: the folder of a run's folder where its writers leave their ends for the node's primary
ENDS_DIR = "ends"


def save_end(folder: Path, label: str, role: str | None, summary: FinishSummary) -> None:
    """A writer's end for the primary of its node (see :meth:`FinishSummary.add_ends`):
    what it logged and what each backend took. Never raises (the primary then says less)."""
    end = {"label": label, "role": role, "journaled": summary.logged,
           "delivered": {name: info["delivered"] for name, info in summary.backends.items()}}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        replace_text(folder / f"{label}.json", json.dumps(end))
    except OSError:
        pass


def count(value: Any) -> int:
    """A count a writer published (anything else: 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
