"""The job's writer registry: how far each writer's delivery is, where every node can read it.

A backend that every node of the job reaches (MLflow's tracking server) keeps the registry through
two optional hooks, :func:`~tracking_core.hookspecs.publish_writer` and
:func:`~tracking_core.hookspecs.read_writers`. Each backend's worker publishes its writer's state
through its own backend (so ``delivered`` is what *that* tracker has), with a :class:`Publisher`
that says when: ``writing`` once the run is open there, again when it has caught up after
delivering (at most every :data:`SPACING` seconds) and as a heartbeat every
``$TRACKING_CORE_WRITER_HEARTBEAT`` seconds while the writer writes, then ``complete`` or
``incomplete`` when it closes. A publication is one call between two batches, never retried: a
failure costs that publication only (the next one says as much), never a record.

A finishing primary's worker reads the registry (:func:`await_writers`) before it closes the run:
it waits, within its finish timeout, for every writer it has not handled itself (those on its own
host whose journals lie in its own tracking directory were waited for or replayed by the finish
already) until each is complete, or caught up in a publication made after the primary began to
close, or silent for three heartbeats (a node that died). Those still owing data then are named
(:func:`owing_text`): in the finish summary, and on the run, which is closed FAILED instead of the
status meant until ``tracking-core sync`` on their node completes them.

No verdict compares one host's clock with another's: the primary judges a publication by when
its own monotonic clock first saw it (a publication not there at one read was made after that
read was sent) and by what the writer measured on its own clock (``behind``: how many seconds
before its publication everything it had logged was delivered). ``at`` is shown, never judged.
Every string a writer publishes (who it is, the lines of the writers a primary names) passes
the same redaction as any other field a tracker stores.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import settings
from ..config.secrets import redact_text
from ..views import sync_command

if TYPE_CHECKING:
    from .failures import Breaker

log = logging.getLogger("tracking_core.delivery")

#: The least time between two publications of one writer, its first and its last excepted.
SPACING = 2.0
#: How long a writer stays caught up before it says so (the caught-up news of a writer that
#: finishes right after its last records would only delay its finish).
SETTLE = 1.0
#: How often a finishing primary reads the registry while it waits.
READ_EVERY = 1.0
#: Heartbeats a writer may miss before a finishing primary takes it for dead (plus
#: :data:`STALE_SLACK` seconds for a slow request), counted on the primary's own clock.
STALE_BEATS = 3
STALE_SLACK = 2.0

WRITING, COMPLETE, INCOMPLETE = "writing", "complete", "incomplete"
#: The state of a writer the job's store announced and the registry never heard of.
UNHEARD = "unheard"


class Counts(NamedTuple):
    """How far one backend's delivery of a writer is: values journaled (read from the journal
    so far), delivered and refused for good; ``through``: epoch seconds such that everything the
    writer logged before it was delivered (or refused) then."""

    journaled: int
    delivered: int
    rejected: int
    through: float



def identity(
    *,
    label: str,
    role: str | None,
    rank: int | None,
    pid: int | None,
    tracking_dir: str,
    host: str | None = None,
) -> dict[str, Any]:
    """Who a writer is, as the registry shows it (``host``: this one's name by default)."""
    return {
        "label": label,
        "role": role,
        "rank": rank,
        "host": host or socket.gethostname(),
        "pid": pid,
        "tracking_dir": tracking_dir,
        "sync": sync_command(tracking_dir),
    }


class Publisher:
    """When one backend's worker publishes its writer's state (see the module doc), every string
    of it redacted.

    ``publish(state)`` makes the call (the worker's guarded call into its backend); ``live``:
    the writer is running (a replay by ``tracking-core sync`` publishes only its final state)."""

    def __init__(self, who: Mapping[str, Any], publish: Callable[[dict[str, Any]], object], *, live: bool) -> None:
        self.who = dict(who)
        self.publish = publish
        self.live = live
        self.beat = settings.writer_heartbeat() if live else 0.0
        self._last = 0.0  # monotonic time of the last publication (0: none yet)
        self._said: tuple[int, int, int] | None = None  # the counts it said then
        self._caught_up_at: float | None = None  # since when it has been caught up
        self.final = False
        self.seq = 0  # publications made

    def state(self, state: str, counts: Counts, **extra: Any) -> dict[str, Any]:
        """The next publication: ``seq`` counts them; ``behind``: seconds (this host's clock)
        between the publication and the time before which everything logged was delivered."""
        self.seq += 1
        now = time.time()
        return _redacted({
            **self.who,
            "state": state,
            "seq": self.seq,
            "journaled": counts.journaled,
            "delivered": counts.delivered,
            "rejected": counts.rejected,
            "behind": round(max(0.0, now - counts.through), 3),
            "at": round(now, 3),
            "beat": self.beat,
            **extra,
        })

    def opened(self, counts: Counts) -> None:
        """The run is open in the backend: the writer says it writes."""
        if self.live:
            self._send(WRITING, counts)

    def tick(self, counts: Counts, caught_up: bool) -> None:
        """Between two batches: a heartbeat when one is due, else the news of having caught
        up (``caught_up``, for :data:`SETTLE` seconds: a finish that follows the last records at
        once publishes the final state instead) with counts not said yet, at most every
        :data:`SPACING` seconds."""
        if not self.live or self.final:
            return
        now = time.monotonic()
        if not caught_up:
            self._caught_up_at = None
        elif self._caught_up_at is None:
            self._caught_up_at = now
        since = now - self._last
        settled = self._caught_up_at is not None and now - self._caught_up_at >= SETTLE
        if (self.beat and since >= self.beat) or (settled and counts[:3] != self._said and since >= SPACING):
            self._send(WRITING, counts)

    def closed(self, counts: Counts, complete: bool, **extra: Any) -> None:
        """The writer's end: ``complete`` (everything delivered, or refused for good) or not."""
        self.final = True
        self._send(COMPLETE if complete else INCOMPLETE, counts, **extra)

    def _send(self, state: str, counts: Counts, **extra: Any) -> None:
        self._last = time.monotonic()
        self._said = (counts.journaled, counts.delivered, counts.rejected)
        self.publish(self.state(state, counts, **extra))


class Registration:
    """One backend's side of the registry: this writer's state published through its
    ``publish_writer`` (by a :class:`Publisher`, from when the run is open there) and the job's
    other writers read through its ``read_writers``. ``writer``: who the journal's writer is when
    a replay delivers the journal of a writer that is gone (only its final state is published);
    None: this process. A failure is reported once (``breaker``) and never holds up a record."""

    def __init__(self, slot: Any, breaker: Breaker, writer: Mapping[str, Any] | None = None) -> None:
        self.slot = slot
        self.breaker = breaker
        self.who = dict(writer) if writer is not None else None
        self.publisher: Publisher | None = None
        #: the job's other writers as the registry last said them
        self.registry: dict[str, dict[str, Any]] = {}

    @property
    def own(self) -> str:
        return str((self.who or {}).get("label") or self.slot.context.label)

    def opened(self, counts: Counts) -> None:
        """The run is open in the backend: the writer says it writes."""
        self._guarded(self._opened, counts)

    def _opened(self, counts: Counts) -> None:
        if not self.slot.implements("publish_writer"):
            return
        c = self.slot.context
        who = self.who or identity(
            label=c.label,
            role=c.role,
            # A role's writer without a rank is its role's only process: rank 0, as its label says.
            rank=c.rank if c.rank is not None or not c.role else 0,
            pid=c.pid,
            tracking_dir=str(c.tracking_dir),
        )
        self.publisher = Publisher(who, self._publish, live=self.who is None)
        self.publisher.opened(counts)

    def tick(self, counts: Callable[[], Counts], caught_up: bool) -> None:
        publisher = self.publisher
        if publisher is not None:
            self._guarded(lambda: publisher.tick(counts(), caught_up))

    def closed(self, counts: Counts, complete: bool, **extra: Any) -> None:
        """The writer's end (once: a retried close publishes nothing more)."""
        if self.publisher is not None and not self.publisher.final:
            self._guarded(self.publisher.closed, counts, complete, **extra)

    def _guarded(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        try:
            call(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the registry never holds up a record
            log.exception("tracking-core's writer registry hit an internal error in %r", self.slot.spec.name)
            self.publisher = None

    def _publish(self, state: dict[str, Any]) -> None:
        """One publication; a failure is reported once per kind and costs nothing else."""
        try:
            self.slot.call("publish_writer", state=state, run=self.slot.context)
        except Exception as exc:  # noqa: BLE001 - the registry never holds up a record
            self.breaker.record("publish_writer", exc, "no record waits for it (the next publication says as much)")

    def read(self) -> Mapping[str, Mapping[str, Any]] | None:
        """The registry's writers (None: it cannot be read); the others are kept in ``registry``."""
        try:
            found = self.slot.call("read_writers", run=self.slot.context)
        except Exception as exc:  # noqa: BLE001 - a registry that cannot be read is none
            self.breaker.record("read_writers", exc, "the writers on other nodes are not waited for")
            return None
        if not isinstance(found, Mapping):
            return None
        self.registry = {str(k): dict(v) for k, v in found.items() if k != self.own and isinstance(v, Mapping)}
        return found


def _redacted(value: Any) -> Any:
    """``value`` with every string in it (a mapping's keys too) redacted."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {_redacted(key): _redacted(item) for key, item in value.items()}
    return value


# -- a finishing primary's side ------------------------------------------------------------------


def caught_up(state: Mapping[str, Any]) -> bool:
    """Whether everything the writer had journaled when it published was delivered (or refused
    for good) by then."""
    try:
        return int(state.get("journaled") or 0) <= int(state.get("delivered") or 0) + int(state.get("rejected") or 0)
    except (TypeError, ValueError):
        return False


def _number(value: Any, default: float = 0.0) -> float:
    try:
        return default if value is None else float(value)
    except (TypeError, ValueError):
        return default


class Seen(NamedTuple):
    """A writer's newest publication as the finishing primary saw it, on its monotonic clock:
    ``first`` read that showed it; ``after``: the send time of the read before, which did not
    show it (the publication was made later), None when it was there at the first read."""

    publication: str
    first: float
    after: float | None


def silent(state: Mapping[str, Any], seen: Seen, now: float) -> bool:
    """Whether a writer that publishes heartbeats has made no new publication for
    :data:`STALE_BEATS` of them, as the primary's clock measured since it first saw its newest."""
    beat = _number(state.get("beat"))
    return beat > 0 and now - seen.first > STALE_BEATS * beat + STALE_SLACK


def judge(state: Mapping[str, Any], seen: Seen, began: float, now: float) -> str:
    """``done`` (complete; or, in a publication made after ``began`` (when the primary began to
    close), caught up, or having delivered everything it logged before ``began``: a writer that
    goes on logging), ``owing`` (closed incomplete, or silent: dead) or ``waiting``. Times are
    the primary's monotonic clock; the writer's own clock gives durations only (``behind``)."""
    said = state.get("state")
    if said == COMPLETE:
        return "done"
    if said == INCOMPLETE:
        return "owing"
    made = seen.after
    if made is not None and made >= began:
        if caught_up(state) or made - _number(state.get("behind"), math.inf) >= began:
            return "done"
    return "owing" if silent(state, seen, now) else "waiting"


def handled_here(state: Mapping[str, Any], tracking_dir: str | os.PathLike[str]) -> bool:
    """Whether the writer's journal lies where this primary's finish looked for its peers' (its
    own host and tracking directory, as they are or as published: redacted): the finish already
    waited for it or replayed it."""
    host = socket.gethostname()
    if state.get("host") not in (host, redact_text(host)):
        return False
    theirs = state.get("tracking_dir")
    if not isinstance(theirs, str) or not theirs:
        return False
    try:
        mine = Path(tracking_dir).resolve()
        return Path(theirs).resolve() in (mine, Path(redact_text(str(mine))).resolve())
    except (OSError, RuntimeError, ValueError):  # a loop of links, a NUL in the path
        return False


def await_writers(
    read: Callable[[], Mapping[str, Mapping[str, Any]] | None],
    *,
    own: str,
    tracking_dir: str | os.PathLike[str],
    since: float,
    until: float,
    stop: threading.Event,
) -> dict[str, dict[str, Any]]:
    """Wait, until ``until`` (monotonic), for the registry's writers other than ``own`` and
    those :func:`handled_here`; return each that still owes data, label -> :func:`owing_entry`.
    ``read`` is the backend's guarded :func:`read_writers` (None: no registry, or it failed);
    ``since``: when this primary began to close (epoch seconds, this host's clock)."""
    began = time.monotonic() - max(0.0, time.time() - since)
    own = redact_text(own)
    seen: dict[str, Seen] = {}
    asked: float | None = None  # when the last read that answered was sent
    while True:
        sent = time.monotonic()
        found = read()
        now = time.monotonic()
        writers = found or {}
        verdicts = {}
        for label, state in writers.items():
            if label == own or not isinstance(state, Mapping) or handled_here(state, tracking_dir):
                continue
            publication = json.dumps(state, sort_keys=True, default=str)
            if label not in seen or seen[label].publication != publication:
                seen[label] = Seen(publication, now, asked)
            verdicts[label] = judge(state, seen[label], began, now)
        if found is not None:
            asked = sent
        left = until - time.monotonic()
        if "waiting" not in verdicts.values() or left <= 0 or stop.is_set():
            return {
                label: owing_entry(writers[label], seen[label], now)
                for label, verdict in verdicts.items()
                if verdict != "done"
            }
        stop.wait(min(READ_EVERY, left))


def owing_entry(state: Mapping[str, Any], seen: Seen, now: float) -> dict[str, Any]:
    """What the summary and the run say of a writer that owes data; ``last_heard``: seconds
    since the primary first saw its newest publication (at least that when ``heard_before``:
    it was there when the primary began to watch)."""
    journaled, delivered = _int(state.get("journaled")), _int(state.get("delivered"))
    return {
        **{key: state.get(key) for key in ("label", "role", "rank", "host", "state")},
        "journaled": journaled,
        "delivered": delivered,
        "owed": max(0, journaled - delivered - _int(state.get("rejected"))),
        "last_heard": round(max(0.0, now - seen.first), 1),
        "heard_before": seen.after is None,
        "sync": state.get("sync") or sync_command(str(state.get("tracking_dir") or "<its tracking directory>")),
    }


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def owing_text(entry: Mapping[str, Any]) -> str:
    """One writer that owes data, in words: who, what, and the command to run where."""
    rank = entry.get("rank")
    who = f"{entry.get('role') or 'primary'}" + (f" rank {rank}" if rank is not None else "")
    host = entry.get("host")
    if entry.get("state") == UNHEARD:
        what = "attached and never reached the tracker: everything it logged is in its journal there"
    else:
        undelivered = f"{entry.get('owed', 0)} of {entry.get('journaled', 0)} journaled values undelivered"
        heard = f"last heard {'over ' if entry.get('heard_before') else ''}{float(entry.get('last_heard') or 0):.0f} s ago"
        if entry.get("state") == INCOMPLETE:
            what = f"closed incomplete ({heard}): {undelivered}"
        else:
            what = f"still writing when {heard}: {undelivered} then, and what it logged since is in its journal there"
    return f"{who} on host {host} ({entry.get('label')}) {what}; run on {host}: {entry.get('sync')}"
