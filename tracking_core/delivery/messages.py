"""The messages between a training process, its delivery process and the keeper, as types.

One JSON object a line crosses each pipe (see :mod:`.client`, :mod:`.process`, :mod:`.keeper`
and :mod:`.isolation`): requests go to the delivery process on its stdin (:class:`Start` first,
then :class:`Feed`, :class:`Drain`, :class:`Finish`, :class:`Replay`, :class:`Stop`), events come
back on its stdout (:class:`Ready`, :class:`Opened`, :class:`Call`, :class:`Report`,
:class:`Done`, :class:`Log`, :class:`Progressed`; the keeper's :class:`Started` and
:class:`Exited`). Each type has readable field names here and a compact form on the wire (short
keys: ``ev``/``op`` say the type, ``b`` a backend, ``h`` a hook, ``t`` a thread), written by its
``wire()`` and read by :func:`decode_event` / :func:`decode_request`, in this module only. The
keeper runs with the standard library alone and writes its two events itself, in the same form.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Call",
    "Done",
    "Drain",
    "Event",
    "Exited",
    "Feed",
    "Finish",
    "Log",
    "Opened",
    "Progressed",
    "Ready",
    "Replay",
    "Report",
    "Request",
    "Start",
    "Started",
    "Stop",
    "decode_event",
    "decode_request",
    "line",
]


def line(message: Start | Request | Event) -> bytes:
    """One message as the line that crosses a pipe."""
    return (json.dumps(message.wire(), default=str) + "\n").encode()


# -- to the delivery process -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Start:
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

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.crash_fd is not None or self.training is not None:
            out["crash_fd"] = self.crash_fd
            out["training"] = self.training
        out.update(plan=self.plan, log_level=self.log_level, argv=self.argv)
        if self.lock_fd is not None:
            out["lock_fd"] = self.lock_fd
        return out

    @classmethod
    def decode(cls, obj: Mapping[str, Any]) -> Start:
        return cls(
            plan=obj["plan"],
            log_level=int(obj.get("log_level", 30)),
            argv=list(obj.get("argv") or ["tracking-core"]),
            crash_fd=obj.get("crash_fd"),
            training=obj.get("training"),
            lock_fd=obj.get("lock_fd"),
        )


@dataclass(frozen=True, slots=True)
class Feed:
    """Records the writer could not journal (``("records", [...])``), or an older writer's
    switch between journal and memory."""

    message: tuple[str, Any]

    def wire(self) -> dict[str, Any]:
        return {"op": "feed", "msg": list(self.message)}


@dataclass(frozen=True, slots=True)
class Drain:
    """Answer (:class:`Done`) once every backend has done every record up to ``target``."""

    id: int
    target: int
    timeout: float | None

    def wire(self) -> dict[str, Any]:
        return {"op": "drain", "target": self.target, "id": self.id, "timeout": self.timeout}


@dataclass(frozen=True, slots=True)
class Finish:
    """Deliver up to the end record ``end``, apply the completion rule, answer and exit."""

    id: int
    end: int
    timeout: float | None

    def wire(self) -> dict[str, Any]:
        return {"op": "finish", "end": self.end, "id": self.id, "timeout": self.timeout}


@dataclass(frozen=True, slots=True)
class Replay:
    """``tracking-core sync``'s request: deliver the journal of a writer that is gone to its end."""

    id: int
    timeout: float | None

    def wire(self) -> dict[str, Any]:
        return {"op": "replay", "id": self.id, "timeout": self.timeout}


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop delivering at once (what is not done stays in the journal)."""

    def wire(self) -> dict[str, Any]:
        return {"op": "stop"}


Request = Feed | Drain | Finish | Replay | Stop


def decode_request(obj: Mapping[str, Any]) -> Request | None:
    """A request from its line's object; None for one this version does not know."""
    op = obj.get("op")
    if op == "feed":
        kind, value = obj["msg"]
        return Feed((kind, value))
    if op == "drain":
        return Drain(int(obj["id"]), int(obj["target"]), _timeout(obj))
    if op == "finish":
        return Finish(int(obj["id"]), int(obj["end"]), _timeout(obj))
    if op == "replay":
        return Replay(int(obj["id"]), _timeout(obj))
    if op == "stop":
        return Stop()
    return None


def _timeout(obj: Mapping[str, Any]) -> float | None:
    value = obj.get("timeout")
    return None if value is None else float(value)


# -- from the delivery process (and its keeper) ----------------------------------------------
@dataclass(frozen=True, slots=True)
class Ready:
    """The follower runs: a death from now on is no failure to start."""

    pid: int

    def wire(self) -> dict[str, Any]:
        return {"ev": "ready", "pid": self.pid}


@dataclass(frozen=True, slots=True)
class Opened:
    """The primary opened the run in ``backend``: ``result`` is its entry in the run handle."""

    backend: str
    result: Any

    def wire(self) -> dict[str, Any]:
        return {"ev": "opened", "b": self.backend, "result": self.result}


@dataclass(frozen=True, slots=True)
class Call:
    """``backend``'s code runs ``hook`` on thread ``thread`` (``hook`` None: the call returned):
    whose code it was, should the process die."""

    backend: str
    hook: str | None
    thread: int

    def wire(self) -> dict[str, Any]:
        return {"ev": "call", "b": self.backend, "h": self.hook, "t": self.thread}


@dataclass(frozen=True, slots=True)
class Report:
    """The follower's report (:meth:`Follower.report`), sent when it changed."""

    report: dict[str, Any]

    def wire(self) -> dict[str, Any]:
        return {"ev": "report", "report": self.report}


@dataclass(frozen=True, slots=True)
class Done:
    """The answer to request ``id``: ``ok`` (drained, or finished complete) and the report then
    (None: none came with it)."""

    id: int
    ok: bool
    report: dict[str, Any] | None = None

    def wire(self) -> dict[str, Any]:
        return {"ev": "done", "id": self.id, "ok": self.ok, "report": self.report}


@dataclass(frozen=True, slots=True)
class Log:
    """A log record of the delivery process (``failure``: what :mod:`.failures` needs to say a
    cause once)."""

    name: str
    level: int
    msg: str
    failure: Mapping[str, Any] | None = None

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ev": "log", "name": self.name, "level": self.level, "msg": self.msg}
        if self.failure is not None:
            out["failure"] = self.failure
        return out


@dataclass(frozen=True, slots=True)
class Progressed:
    """A replaying process's progress (backend -> ``BackendProgress.to_dict()``), which the
    ``tracking-core sync`` that started it alone saves."""

    acks: Mapping[str, Mapping[str, Any]]

    def wire(self) -> dict[str, Any]:
        return {"ev": "acks", "acks": self.acks}


@dataclass(frozen=True, slots=True)
class Started:
    """The keeper started the delivery process ``pid``; ``keeper`` is its own pid."""

    pid: int
    keeper: int

    def wire(self) -> dict[str, Any]:
        return {"ev": "started", "pid": self.pid, "keeper": self.keeper}


@dataclass(frozen=True, slots=True)
class Exited:
    """The delivery process ended with ``code`` (``-SIGNAL`` for a signal)."""

    code: int

    def wire(self) -> dict[str, Any]:
        return {"ev": "exited", "code": self.code}


Event = Ready | Opened | Call | Report | Done | Log | Progressed | Started | Exited

_EVENTS: dict[str, Callable[[Mapping[str, Any]], Event]] = {
    "ready": lambda o: Ready(int(o.get("pid") or 0)),
    "opened": lambda o: Opened(str(o["b"]), o.get("result")),
    "call": lambda o: Call(str(o["b"]), str(o["h"]) if o.get("h") else None, int(o.get("t") or 0)),
    "report": lambda o: Report(dict(o["report"])),
    "done": lambda o: Done(int(o["id"]), bool(o.get("ok")), o.get("report")),
    "log": lambda o: Log(str(o["name"]), int(o["level"]), str(o["msg"]), o.get("failure")),
    "acks": lambda o: Progressed(dict(o["acks"])),
    "started": lambda o: Started(int(o["pid"]), int(o["keeper"])),
    "exited": lambda o: Exited(int(o["code"])),
}


def decode_event(obj: Mapping[str, Any]) -> Event | None:
    """An event from its line's object; None for one this version does not know."""
    decode = _EVENTS.get(str(obj.get("ev")))
    return None if decode is None else decode(obj)
