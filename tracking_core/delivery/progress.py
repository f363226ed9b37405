"""How far each backend is through a journal: the one place that says what "done" means.

Every question about delivery is asked here, so that the follower, ``tracking-core sync``, the
finish summary and the end-of-run block cannot answer it differently:

* is record ``n`` done for a backend (:meth:`BackendProgress.done`): delivered, or rejected by
  the tracker and reported; a config section it refused is *owed*, not done;
* has a backend handled every record up to ``n`` (:meth:`BackendProgress.reached`): done, or
  set aside as owed. This is what waiting can bring about (a drain, a primary waiting for the
  other writers of its node): an owed section is offered again only by a later delivery;
* is the run closed in a backend (:meth:`BackendProgress.closed`), does it owe a config section
  (:meth:`BackendProgress.owes_config`);
* what a delivery did here (:meth:`BackendProgress.since`): values delivered and rejected, and
  config sections delivered, counted as the finish summary counts what is owed (``tracking-core
  sync`` says it);
* may segments go (:meth:`Progress.done_through`: every record up to it is done everywhere);
* may the journal go, and what is missing where (:meth:`Progress.outstanding`): **the
  completion rule** — the close is journaled and every backend has done every record up to it,
  the close included, and owes no config section.

Acknowledgements are exact because the pump numbers records in the order they are appended:
"done up to n" never covers a record that was not handed over. The progress is saved in the
journal's ``acks.json`` (:class:`~tracking_core.delivery.journal.Acks`) and crosses processes
as plain data (:meth:`BackendProgress.to_dict`, :meth:`BackendProgress.from_mapping`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["BackendProgress", "Progress"]


@dataclass
class BackendProgress:
    """How far one backend is: every record up to ``n`` is handled (done, or ``owed``: config
    records it refused, still to deliver); ``delivered`` and ``rejected`` count values,
    ``configs`` the config sections delivered."""

    n: int = -1
    delivered: int = 0
    rejected: int = 0
    owed: list[int] = field(default_factory=list)
    configs: int = 0

    def done(self, n: int) -> bool:
        """Record ``n`` is done here: delivered, or rejected by the tracker and reported."""
        return n <= self.n and n not in self.owed

    def reached(self, n: int) -> bool:
        """Every record up to ``n`` is done here or set aside as owed: nothing a wait can
        bring about is left (an owed section waits for a later delivery)."""
        return self.n >= n

    def closed(self, end_n: int | None) -> bool:
        """The run's close (record ``end_n``; None: not journaled) is done here."""
        return end_n is not None and self.n >= end_n

    def owes_config(self) -> bool:
        """A config section this backend refused is still to deliver."""
        return bool(self.owed)

    def lacks(self, end_n: int | None) -> str:
        """What this backend still lacks of a journal whose close is ``end_n``, in words; empty
        when it has everything (see :meth:`Progress.outstanding`)."""
        missing = []
        if end_n is None:
            missing.append("the run's end (not journaled)")
        elif self.n < end_n:
            missing.append(f"records {self.n + 1}..{end_n} (the close included)")
        if self.owed:
            missing.append(f"{len(self.owed)} config section(s)")
        return ", ".join(missing)

    def since(self, before: BackendProgress | None) -> tuple[int, int, int]:
        """What was done here since ``before`` (None: nothing yet): values delivered, values
        rejected, config sections delivered. A section the summary called owed (refused, or not
        reached) and a later delivery took counts here, and nowhere as a value."""
        was = before or BackendProgress()
        return (
            max(0, self.delivered - was.delivered),
            max(0, self.rejected - was.rejected),
            max(0, self.configs - was.configs),
        )

    def report(self, sections: Mapping[int, str] | None = None, **more: Any) -> dict[str, Any]:
        """Plain data for the summary (``sections``: the namespace of an owed record)."""
        named = sections or {}
        return {
            "n": self.n,
            "delivered": self.delivered,
            "rejected": self.rejected,
            "failures": {},
            "missing_configs": [named.get(n, f"#{n}") for n in self.owed],
            "ready": False,
            "circuit_open": False,
            **more,
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> BackendProgress:
        """From ``acks.json`` or a report (``KeyError``, ``TypeError``, ``ValueError`` when it
        is no progress: ``n`` is required)."""
        counts = {key: int(data.get(key, 0)) for key in ("delivered", "rejected", "configs")}
        return cls(n=int(data["n"]), owed=[int(x) for x in data.get("owed", [])], **counts)


class Progress:
    """Every backend's progress through one journal, for the journal's backends ``names``
    (a backend with no acknowledgement yet has done nothing)."""

    def __init__(self, backends: Mapping[str, BackendProgress], names: Iterable[str]) -> None:
        self._backends = backends
        self.names = list(names)

    def of(self, name: str) -> BackendProgress:
        return self._backends.get(name) or BackendProgress()

    def done(self, name: str, n: int) -> bool:
        return self.of(name).done(n)

    def outstanding(self, end_n: int | None) -> dict[str, str]:
        """The completion rule: what each backend still lacks, in words; empty when the journal
        is complete and may go. A value a tracker rejected counts as done (it was reported); a
        config section it refused does not."""
        return {name: lacks for name in self.names if (lacks := self.of(name).lacks(end_n))}

    def complete(self, end_n: int | None) -> bool:
        return not self.outstanding(end_n)

    def done_through(self) -> int:
        """Every record up to this one is done by every backend that has acknowledged any (-1:
        none known): segments before it may be deleted, and delivery resumes after it."""
        progress = [p for name, p in self._backends.items() if name in self.names]
        if not progress:
            return -1
        return min([p.n for p in progress] + [n - 1 for p in progress for n in p.owed])

    def reached(self, last: int) -> bool:
        """Every backend has acknowledged every record up to ``last`` (done, or owed: see
        :meth:`BackendProgress.reached`)."""
        return all(name in self._backends and self._backends[name].reached(last) for name in self.names)
