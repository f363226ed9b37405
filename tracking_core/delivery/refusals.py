"""Bad records set aside while the backend takes the rest.

A batch that keeps failing is tried record by record (a lone record or a config: against the next
batch). If the backend takes the others, what it keeps refusing is set aside: a metric value is
*rejected* (reported once with its key, counted, and skipped for this backend only), a config
section is *owed* (kept for ``tracking-core sync``). When nothing gets through, the backend is
down, not the data: the records wait. A rich record of a kind the backend has no hook for goes
through the kind's fallback, or is set aside (counted).
"""

from __future__ import annotations

import logging
from typing import Any

from . import kinds
from .entries import Entry
from .failures import BREAKER_THRESHOLD

log = logging.getLogger("tracking_core.delivery")

#: A rich record the backend has no hook for (nor a fallback): set aside, counted.
UNSUPPORTED = object()


def section_of(entry: Entry) -> str | None:
    """The namespace of a config entry's section."""
    return getattr(getattr(entry, "section", None), "namespace", None)


class Refusals:
    """``judging``: a batch is being isolated (its failures judge the backend's health, not the
    breaker)."""

    def __init__(self, worker: Any) -> None:  # its BackendWorker (delivery.worker)
        self.worker = worker
        self.judging = False
        self._rejected_keys: set[str] = set()
        self._fallbacks: set[str] = set()

    def isolate(self, batch: list[Entry]) -> bool:
        """Set aside what the backend refuses while it takes the rest; False when it is down or
        there is nothing yet to tell (the batch stays and is retried)."""
        verdict = self._isolate(batch)
        if verdict == "resolved":  # it took other records: refusals of bad data say nothing of its health
            self.worker.breaker.succeeded(quietly=True)
            return True
        # Nothing got through: it is down; or nothing to compare with: a failure like any other.
        self.worker.breaker.failed(BREAKER_THRESHOLD if verdict == "down" else 1)
        return False

    def _isolate(self, batch: list[Entry]) -> str:
        """``resolved`` (what it refuses is set aside), ``down`` or ``unknown``."""
        w = self.worker
        kind = kinds.of(batch[0])
        if kind.batched:  # its records one by one
            records = w.records(batch)
            if len(records) > 1:
                return self._isolate_records(batch, records)
        probe = w.batches.next(urgent=True)
        if not probe or kinds.of(probe[0]).closes:
            # Nothing after it to tell a refusal from an outage (the close is no probe: nothing
            # may follow it): keep retrying; what is left at the end stays in the journal.
            w.batches.put_back(probe)
            return "unknown"
        ok, result = w.call(probe)
        if not ok:
            w.batches.put_back(probe)
            return "down"
        # The backend took the next batch: it is up, and refuses this one.
        self._set_aside(batch)
        w.took(probe, result)
        return "resolved"

    def _isolate_records(self, batch: list[Entry], records: list[Any]) -> str:
        w = self.worker

        def send(record: Any) -> tuple[bool, Any]:
            return w.attempt("log_metrics", records=[record], run=w.context)

        failed = []
        delivered = 0
        for record in records:
            if send(record)[0]:
                delivered += 1
            else:
                failed.append(record)
                if not delivered and len(failed) >= BREAKER_THRESHOLD + 1:
                    return "down"  # nothing gets through: down, not bad data
        if not delivered:
            return "down"
        rejected = 0
        for record in failed:
            ok, exc = send(record)
            if not ok:
                rejected += 1
                self.rejected(record.name, exc)
        w.done(batch, delivered=len(records) - rejected, rejected=rejected)  # the others went through
        return "resolved"

    def _set_aside(self, batch: list[Entry]) -> None:
        w = self.worker
        ok, exc = w.call(batch)  # one last try now that the backend is known to be up
        kind = kinds.of(batch[0])
        if ok:
            w.done(batch, delivered=kinds.count(batch))
        elif kind.owed:
            log.warning(
                "backend %r refuses config section %r (%s: %s) while it takes other records; "
                "the section stays in the journal for `tracking-core sync`",
                w.name,
                section_of(batch[0]),
                type(exc).__name__,
                exc,
            )
            w.done(batch, owed=True)
        else:
            names = [r.name for r in w.records(batch)] if kind.batched else [w.prefix + kinds.key_of(batch[0])]
            for name in names:
                self.rejected(name, exc)
            w.done(batch, rejected=len(names))

    def fall_back(self, kind: kinds.Kind, record: Any) -> tuple[bool, Any]:
        """A record of a kind whose hook the backend lacks: through the kind's first fallback
        the backend has (see the hookspecs), else set aside (counted)."""
        w = self.worker
        for fallback in kind.fallbacks:
            if w.slot.implements(fallback.hook):
                if self._first(kind):
                    log.warning("backend %r has no %s hook: its %s go to it %s", w.name, kind.hook, kind.noun, fallback.how)
                return w.attempt(fallback.hook, **fallback.arguments(record), run=w.context)
        return True, UNSUPPORTED

    def unsupported(self, batch: list[Entry]) -> None:
        kind = kinds.of(batch[0])
        if self._first(kind):
            hooks = [str(kind.hook), *(f.hook for f in kind.fallbacks)]
            log.warning(
                "backend %r takes no %s (it has %s): they are skipped for it and counted as "
                "rejected in the finish summary",
                self.worker.name,
                kind.noun,
                f"neither {' nor '.join(hooks)}" if len(hooks) > 1 else f"no {hooks[0]}",
            )
        self.worker.done(batch, rejected=1)

    def _first(self, kind: kinds.Kind) -> bool:
        first = kind.name not in self._fallbacks
        self._fallbacks.add(kind.name)
        return first

    def rejected(self, key: str, exc: BaseException) -> None:
        if key not in self._rejected_keys:
            self._rejected_keys.add(key)
            log.warning(
                "backend %r rejects metric %r (%s: %s): its values are skipped for this backend "
                "only and counted in the finish summary",
                self.worker.name,
                key,
                type(exc).__name__,
                exc,
            )
