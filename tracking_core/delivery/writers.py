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
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from .. import settings

log = logging.getLogger("tracking_core.delivery")

#: The least time between two publications of one writer, its first and its last excepted.
SPACING = 2.0
#: How long a writer stays caught up before it says so (the caught-up news of a writer that
#: finishes right after its last records would only delay its finish).
SETTLE = 1.0
#: How often a finishing primary reads the registry while it waits.
READ_EVERY = 1.0
#: Heartbeats a writer may miss before a finishing primary takes it for dead (plus
#: :data:`STALE_SLACK` seconds for clocks and a slow request).
STALE_BEATS = 3
STALE_SLACK = 2.0

WRITING, COMPLETE, INCOMPLETE = "writing", "complete", "incomplete"


class Counts(NamedTuple):
    """How far one backend's delivery of a writer is: values journaled (read from the journal
    so far), delivered and refused for good; ``through``: epoch seconds such that everything the
    writer logged before it was delivered (or refused) then."""

    journaled: int
    delivered: int
    rejected: int
    through: float


def sync_command(tracking_dir: str) -> str:
    """The command that delivers a writer's leftovers, to be run on its host (named as it runs
    on this one: the same installation is taken to be there)."""
    from ..report import sync_command as command

    return command(tracking_dir)


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
    """When one backend's worker publishes its writer's state (see the module doc).

    ``publish(state)`` makes the call (the worker's guarded call into its backend); ``live``:
    the writer is running (a replay by ``tracking-core sync`` publishes only its final state)."""

    def __init__(self, who: Mapping[str, Any], publish: Callable[[dict[str, Any]], bool], *, live: bool) -> None:
        self.who = dict(who)
        self.publish = publish
        self.live = live
        self.beat = settings.writer_heartbeat() if live else 0.0
        self._last = 0.0  # monotonic time of the last publication (0: none yet)
        self._said: tuple[int, int, int] | None = None  # the counts it said then
        self._caught_up_at: float | None = None  # since when it has been caught up
        self.final = False

    def state(self, state: str, counts: Counts, **extra: Any) -> dict[str, Any]:
        return {
            **self.who,
            "state": state,
            "journaled": counts.journaled,
            "delivered": counts.delivered,
            "rejected": counts.rejected,
            "through": round(counts.through, 3),
            "at": round(time.time(), 3),
            "beat": self.beat,
            **extra,
        }

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
        if self.beat and since >= self.beat:
            self._send(WRITING, counts)
        elif (
            self._caught_up_at is not None
            and now - self._caught_up_at >= SETTLE
            and counts[:3] != self._said
            and since >= SPACING
        ):
            self._send(WRITING, counts)

    def closed(self, counts: Counts, complete: bool, **extra: Any) -> None:
        """The writer's end: ``complete`` (everything delivered, or refused for good) or not."""
        self.final = True
        self._send(COMPLETE if complete else INCOMPLETE, counts, **extra)

    def _send(self, state: str, counts: Counts, **extra: Any) -> None:
        self._last = time.monotonic()
        self._said = (counts.journaled, counts.delivered, counts.rejected)
        self.publish(self.state(state, counts, **extra))


# -- a finishing primary's side ------------------------------------------------------------------


def caught_up(state: Mapping[str, Any]) -> bool:
    """Whether everything the writer had journaled when it published was delivered (or refused
    for good) by then."""
    try:
        return int(state.get("journaled") or 0) <= int(state.get("delivered") or 0) + int(state.get("rejected") or 0)
    except (TypeError, ValueError):
        return False


def _at(state: Mapping[str, Any]) -> float:
    return _number(state.get("at"))


def _number(value: Any) -> float:
    try:
        return float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0


def silent(state: Mapping[str, Any], now: float) -> bool:
    """Whether a writer that publishes heartbeats has missed :data:`STALE_BEATS` of them."""
    try:
        beat = float(state.get("beat") or 0.0)
    except (TypeError, ValueError):
        beat = 0.0
    return beat > 0 and now - _at(state) > STALE_BEATS * beat + STALE_SLACK


def judge(state: Mapping[str, Any], since: float, now: float) -> str:
    """``done`` (complete; or caught up in a publication made after ``since``, or having
    delivered everything logged before ``since``: a writer that goes on logging), ``owing``
    (closed incomplete, or silent: dead) or ``waiting``."""
    said = state.get("state")
    if said == COMPLETE:
        return "done"
    if said == INCOMPLETE:
        return "owing"
    if (_at(state) >= since and caught_up(state)) or _number(state.get("through")) >= since:
        return "done"
    return "owing" if silent(state, now) else "waiting"


def handled_here(state: Mapping[str, Any], tracking_dir: str | os.PathLike[str]) -> bool:
    """Whether the writer's journal lies where this primary's finish looked for its peers' (its
    own host and tracking directory): the finish already waited for it or replayed it."""
    if state.get("host") != socket.gethostname():
        return False
    theirs = state.get("tracking_dir")
    if not isinstance(theirs, str) or not theirs:
        return False
    try:
        return Path(theirs).resolve() == Path(tracking_dir).resolve()
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
    ``read`` is the backend's guarded :func:`read_writers` (None: no registry, or it failed)."""
    while True:
        writers = read() or {}
        now = time.time()
        verdicts = {
            label: judge(state, since, now)
            for label, state in writers.items()
            if label != own and isinstance(state, Mapping) and not handled_here(state, tracking_dir)
        }
        waiting = [label for label, verdict in verdicts.items() if verdict == "waiting"]
        left = until - time.monotonic()
        if not waiting or left <= 0 or stop.is_set():
            return {
                label: owing_entry(writers[label], now)
                for label, verdict in verdicts.items()
                if verdict != "done"
            }
        stop.wait(min(READ_EVERY, left))


def owing_entry(state: Mapping[str, Any], now: float) -> dict[str, Any]:
    """What the summary and the run say of a writer that owes data."""
    journaled = _int(state.get("journaled"))
    done = _int(state.get("delivered")) + _int(state.get("rejected"))
    return {
        "label": state.get("label"),
        "role": state.get("role"),
        "rank": state.get("rank"),
        "host": state.get("host"),
        "state": state.get("state"),
        "journaled": journaled,
        "delivered": _int(state.get("delivered")),
        "owed": max(0, journaled - done),
        "last_heard": round(max(0.0, now - _at(state)), 1),
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
    undelivered = f"{entry.get('owed', 0)} of {entry.get('journaled', 0)} journaled values undelivered"
    heard = f"last heard {float(entry.get('last_heard') or 0):.0f} s ago"
    if entry.get("state") == INCOMPLETE:
        what = f"closed incomplete ({heard}): {undelivered}"
    else:
        what = f"still writing when {heard}: {undelivered} then, and what it logged since is in its journal there"
    host = entry.get("host")
    return f"{who} on host {host} ({entry.get('label')}) {what}; run on {host}: {entry.get('sync')}"
