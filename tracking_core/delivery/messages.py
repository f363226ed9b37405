"""The messages between a training process, its delivery process and the keeper, as types.

One JSON object a line crosses each pipe (see :mod:`.client`, :mod:`.process`, :mod:`.keeper`
and :mod:`.isolation`): requests go to the delivery process on its stdin (:class:`Start` first,
then :class:`Feed`, :class:`Drain`, :class:`Finish`, :class:`Replay`, :class:`Stop`), events come
back on its stdout (:class:`Ready`, :class:`Opened`, :class:`Call`, :class:`Report`,
:class:`Done`, :class:`Log`, :class:`Progressed`; the keeper's :class:`Started` and
:class:`Exited`). On the wire a message is its fields by name, and ``ev`` (an event) or ``op`` (a request) its
type's name in lower case (:func:`line`; read back by :func:`decode_event` /
:func:`decode_request`): the two ends of a pipe are always the same version. The keeper runs with
the standard library alone and writes its two events itself, in the same form.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar

from .failures import FAILURE

T = TypeVar("T")


def line(message: Start | Request | Event) -> bytes:
    """One message as the line that crosses a pipe."""
    out = message._asdict()
    if not isinstance(message, Start):
        out["op" if isinstance(message, Request) else "ev"] = type(message).__name__.lower()
    return (json.dumps(out, default=str) + "\n").encode()


def _read(cls: type[T], obj: Mapping[str, Any]) -> T:
    return cls(**{name: obj[name] for name in cls._fields if name in obj})  # type: ignore[attr-defined]


# -- to the delivery process -----------------------------------------------------------------
class Start(NamedTuple):
    """The first line: the follower's plan (:meth:`Plan.to_json`'s data), the log level and
    command line to take on, and the descriptors the process inherits: ``crash_fd`` (where a
    fatal signal's report goes), ``training`` (``pid`` and ``pidfd`` of the process it delivers
    for) and ``lock_fd`` (the journal's lock, handed down by ``tracking-core sync``)."""

    plan: Mapping[str, Any]
    log_level: int
    argv: list[str]
    crash_fd: int | None = None
    training: Mapping[str, Any] | None = None
    lock_fd: int | None = None

    @classmethod
    def decode(cls, obj: Mapping[str, Any]) -> Start:
        return _read(cls, obj)


class Feed(NamedTuple):
    """Records the writer could not journal (``("records", [...])``), or an older writer's
    switch between journal and memory."""

    message: tuple[str, Any]  # a list on the wire: made a tuple again by decode_request


class Drain(NamedTuple):
    """Answer (:class:`Done`) once every backend has done every record up to ``target``."""

    id: int
    target: int
    timeout: float | None


class Finish(NamedTuple):
    """Deliver up to the end record ``end``, apply the completion rule, answer and exit."""

    id: int
    end: int
    timeout: float | None


class Replay(NamedTuple):
    """``tracking-core sync``'s request: deliver the journal of a writer that is gone to its end."""

    id: int
    timeout: float | None


class Stop(NamedTuple):
    """Stop delivering at once (what is not done stays in the journal)."""


Request = Feed | Drain | Finish | Replay | Stop


# -- from the delivery process (and its keeper) ----------------------------------------------
class Ready(NamedTuple):
    """The follower runs: a death from now on is no failure to start."""

    pid: int


class Opened(NamedTuple):
    """The primary opened the run in ``backend``: ``result`` is its entry in the run handle."""

    backend: str
    result: Any


class Call(NamedTuple):
    """``backend``'s code runs ``hook`` on thread ``thread`` (``hook`` None: the call returned):
    whose code it was, should the process die."""

    backend: str
    hook: str | None
    thread: int


class Report(NamedTuple):
    """The follower's report (:meth:`Follower.report`), sent when it changed."""

    report: dict[str, Any]


class Done(NamedTuple):
    """The answer to request ``id``: ``ok`` (drained, or finished complete) and the report then
    (None: none came with it)."""

    id: int
    ok: bool
    report: dict[str, Any] | None = None


class Log(NamedTuple):
    """A log record of the delivery process (``failure``: what :mod:`.failures` needs to say a
    cause once)."""

    name: str
    level: int
    msg: str
    failure: Mapping[str, Any] | None = None

    def emit(self) -> None:
        """Log it here, as the delivery process's logger would have."""
        extra = {FAILURE: self.failure} if isinstance(self.failure, Mapping) else None
        logging.getLogger(self.name).log(self.level, "%s", self.msg, extra=extra)


class Progressed(NamedTuple):
    """A replaying process's progress (backend -> ``BackendProgress.to_dict()``), which the
    ``tracking-core sync`` that started it alone saves."""

    acks: Mapping[str, Mapping[str, Any]]


class Started(NamedTuple):
    """The keeper started the delivery process ``pid``; ``keeper`` is its own pid."""

    pid: int
    keeper: int


class Exited(NamedTuple):
    """The delivery process ended with ``code`` (``-SIGNAL`` for a signal)."""

    code: int


Event = Ready | Opened | Call | Report | Done | Log | Progressed | Started | Exited

_REQUESTS: dict[str, type[Request]] = {c.__name__.lower(): c for c in (Feed, Drain, Finish, Replay, Stop)}
_EVENTS: dict[str, type[Event]] = {c.__name__.lower(): c for c in (Ready, Opened, Call, Report, Done, Log, Progressed, Started, Exited)}


def decode_request(obj: Mapping[str, Any]) -> Request | None:
    """A request from its line's object; None for one this version does not know."""
    cls = _REQUESTS.get(str(obj.get("op")))
    if cls is Feed:
        return Feed(tuple(obj["message"]))
    return None if cls is None else _read(cls, obj)


def decode_event(obj: Mapping[str, Any]) -> Event | None:
    """An event from its line's object; None for one this version does not know."""
    cls = _EVENTS.get(str(obj.get("ev")))
    return None if cls is None else _read(cls, obj)
