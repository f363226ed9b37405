"""Delivery in a helper process: the training process only journals, a child delivers.

Trackers' client code is Python (an MLflow request costs a few milliseconds of interpreter time,
a W&B row half a millisecond); run on threads of the training process it holds the GIL the
training thread needs. So by default each writing process starts one **delivery process**
(``python -m tracking_core.delivery_process``) that builds the backends, follows the process's
journal as it grows, and acknowledges into it. The training process keeps only the caller's
deque and the pump that appends rows to the journal every flush interval.

This module is the training process's side: :class:`DeliveryProcess` starts the child and talks
to it over its stdin and stdout (one JSON object per line), and a :class:`RemoteWorker` per
backend stands in for the in-process :class:`~tracking_core.dispatch.BackendWorker`, with the
same methods, so that :class:`~tracking_core.dispatch.Dispatcher` and the run need not know
where delivery happens. Rows and configs reach the child through the journal (the pump has
already written them there); only open/attach results, flush and close requests, the child's
counters and its log records travel over the pipes.

The child is started in its own session: a SIGINT or SIGTERM meant for the training job's process
group does not cut its delivery short. When the training process ends without stopping it
(SIGKILL, ``os._exit``), the child notices, delivers what the journal holds within
``$TRACKING_CORE_EXIT_TIMEOUT`` seconds, closes the run as KILLED and exits; what it could not
deliver stays in the journal for ``tracking-core sync``. Delivery stays in-process (threads)
with ``delivery="thread"`` or ``$TRACKING_CORE_DELIVERY=thread``, without a journal, or when a
selected backend comes from a plugin registered at run time (a child could not load it).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import IO, Any

from .context import RunContext
from .errors import TrackingError
from .handle import RunHandle
from .plugins import PluginManager
from .registry import BackendSpec

log = logging.getLogger("tracking_core.remote")

DELIVERY_ENV = "TRACKING_CORE_DELIVERY"
MODES = ("process", "thread")
#: How long a new delivery process may take to say it is ready before delivery falls back to
#: threads in the training process.
START_TIMEOUT = 30.0
#: How much longer than a flush's own timeout to wait for the child's answer.
REPLY_GRACE = 2.0
#: How many times a delivery process that died is started again within one run.
MAX_RESTARTS = 3


class DeliveryUnavailable(TrackingError):
    """Delivery cannot run in a helper process for this run."""


def delivery_mode(explicit: str | None, specs: Sequence[BackendSpec], manager: PluginManager, journal: bool) -> str:
    """``"process"`` or ``"thread"``: ``explicit`` (``delivery=`` or ``--tracking-delivery``),
    else ``$TRACKING_CORE_DELIVERY``, else
    process whenever a child can build every selected backend. An explicit ``process`` that
    cannot be honoured is an error that says why."""
    asked = explicit or os.environ.get(DELIVERY_ENV, "").strip().lower() or None
    if asked is not None and asked not in MODES:
        source = "delivery= (--tracking-delivery)" if explicit else f"${DELIVERY_ENV}"
        raise ValueError(f"{source} is {asked!r}; use one of: {', '.join(MODES)}")
    if asked == "thread" or not specs:
        return "thread"
    reason = _why_not_process(specs, manager, journal)
    if reason is None:
        return "process"
    if asked == "process":
        raise DeliveryUnavailable(
            f"delivery in a helper process was asked for, but {reason}; use delivery='thread' "
            f"(--tracking-delivery thread, or {DELIVERY_ENV}=thread)"
        )
    log.debug("delivery runs on threads of this process: %s", reason)
    return "thread"


def _why_not_process(specs: Sequence[BackendSpec], manager: PluginManager, journal: bool) -> str | None:
    if not journal:
        return "the run has no journal (journal=False), and the journal is how records reach it"
    if not sys.executable:
        return "this interpreter does not know its executable (sys.executable is empty)"
    for spec in specs:
        info = manager.plugins.get(spec.plugin)
        if info is None or info.distribution is None:
            return (
                f"backend {spec.name!r} comes from plugin {spec.plugin!r}, registered at run time "
                "rather than through an entry point, so a new interpreter cannot load it"
            )
    return None


def context_json(context: RunContext) -> dict[str, Any]:
    """A context as the child rebuilds it: options that JSON cannot hold become strings."""
    data = asdict(context)
    data["tracking_dir"] = str(context.tracking_dir)
    data["options"] = json.loads(json.dumps(dict(context.options), default=str))
    data["tags"] = dict(context.tags)
    return data


class _Failures:
    """The child's failure counts for one backend, read like a worker's ``FailureLog``."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()


class RemoteWorker:
    """One backend's worker as the training process sees it when the child delivers."""

    def __init__(self, name: str, process: DeliveryProcess) -> None:
        self.name = name
        self._process = process
        self.failures = _Failures()
        self.delivered = 0
        self.spills = 0
        self.ready = False
        self.circuit_open = False
        self.reported_idle = True
        self.rows_written = 0
        self.payload: dict[str, Any] | None = None
        #: The child's open/attach outcome: whether it succeeded (with what) and whether its first
        #: attempt is over; kept until someone registers to hear of it (``watch_open``).
        self.opened = False
        self.open_result: Any = None
        self.first = False
        self._earlier_delivered = 0
        self._earlier_failures: Counter[str] = Counter()

    def update(self, state: Mapping[str, Any]) -> None:
        """The child's latest counters (added to those of the children before it)."""
        self.delivered = self._earlier_delivered + int(state["delivered"])
        self.failures.counts = self._earlier_failures + Counter(state["failures"])
        self.spills = int(state["spills"])
        self.ready = bool(state["ready"])
        self.circuit_open = bool(state["circuit_open"])
        self.reported_idle = bool(state["idle"])

    def carry_over(self) -> None:
        """The child died: keep its counts, forget its state (a new one reads the journal)."""
        self._earlier_delivered = self.delivered
        self._earlier_failures = Counter(self.failures.counts)
        self.reported_idle = False

    # -- the worker interface used by the dispatcher and the run -------------------------------
    def enqueue_rows(self, rows: list[Any], offset: int) -> None:
        """The rows are in the journal already; the child reads them there."""
        self.rows_written += len(rows)

    def wake(self) -> None:
        """The child polls the journal every flush interval."""

    def submit(self, kind: str, payload: Any = None) -> threading.Event:
        if kind in ("open", "attach"):
            # The child was told at start what to do; this registers who waits for the outcome.
            return self._process.watch_open(self, payload or {})
        if kind == "config":
            # Journaled by the run before this call: the child reads it in order with the rows.
            done = threading.Event()
            done.set()
            return done
        return self._process.request({"op": kind, "b": self.name, "status": _plain(payload)})[0]

    def flush(self, timeout: float | None) -> bool:
        done, reply = self._process.request({"op": "flush", "b": self.name, "timeout": timeout})
        if not done.wait(None if timeout is None else timeout + REPLY_GRACE):
            return False
        return bool(reply.get("ok")) and self.idle

    def stop(self) -> None:
        self._process.stop()

    @property
    def idle(self) -> bool:
        return self._process.alive_or_done and self.reported_idle and self._process.rows_seen >= self.rows_written


def _plain(value: Any) -> Any:
    return getattr(value, "value", value)


class DeliveryProcess:
    """The child that delivers one writing process's records (see the module doc).

    ``setup`` builds the child's first line from the action per backend (``open`` or
    ``attach``). A child that dies is started again, up to :data:`MAX_RESTARTS` times: it
    attaches to the run and resumes from the journal, whose acknowledgements say what is done.
    """

    def __init__(
        self,
        setup: Callable[[Mapping[str, str]], dict[str, Any]],
        actions: Mapping[str, str],
        start_timeout: float = START_TIMEOUT,
        on_spawn: Callable[[int], None] | None = None,
    ) -> None:
        self.workers = {name: RemoteWorker(name, self) for name in actions}
        self.rows_seen = 0
        self.alive_or_done = True
        self.restarts = 0
        self._setup = setup
        self._on_spawn = on_spawn
        self._actions = dict(actions)
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[threading.Event, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._started = False
        self._stopped = False
        self._spawn(self._actions)
        if not self._ready.wait(start_timeout) or not self.alive_or_done:
            self._kill()
            raise DeliveryUnavailable(
                f"the delivery process did not start within {start_timeout:.0f} s "
                f"(exit code {self.proc.poll()}; its errors are on stderr above)"
            )
        self._started = True

    def _spawn(self, actions: Mapping[str, str]) -> None:
        env = dict(os.environ)
        # The child imports what this process imports, even from paths added at run time.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tracking_core.delivery_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        with self._lock:
            if self._stopped:  # the run ended while this child was being started again
                proc.kill()
                return
            self.proc = proc
            self._in: IO[bytes] = proc.stdin
        if self._on_spawn is not None:
            self._on_spawn(proc.pid)
        self._reader = threading.Thread(
            target=self._read, args=(proc,), name="tracking-core-delivery-reader", daemon=True
        )
        self._reader.start()
        self._send(self._setup(actions))

    # -- requests ------------------------------------------------------------------------------
    def _send(self, obj: Mapping[str, Any]) -> bool:
        data = (json.dumps(obj, default=str) + "\n").encode()
        with self._lock:
            if self._stopped and obj.get("op") != "stop":
                return False
            try:
                self._in.write(data)
                self._in.flush()
            except (OSError, ValueError):
                return False
        return True

    def request(self, op: dict[str, Any]) -> tuple[threading.Event, dict[str, Any]]:
        """Send ``op``; the event is set when the child answers (or is gone)."""
        done = threading.Event()
        reply: dict[str, Any] = {}
        op["id"] = next(self._ids)
        with self._lock:
            self._waiting[op["id"]] = (done, reply)
        if not self.alive_or_done or not self._send(op):
            with self._lock:
                self._waiting.pop(op["id"], None)
            done.set()
        return done, reply

    def watch_open(self, worker: RemoteWorker, payload: dict[str, Any]) -> threading.Event:
        """Register who waits for the outcome of the open or attach the child was told to run
        at start; the returned event is set after its first attempt."""
        done = payload.setdefault("first", threading.Event())
        with self._lock:
            worker.payload = payload
            opened, first = worker.opened, worker.first
        if opened:
            self._opened(worker)
        if first:
            self._first(worker)
        return done

    def _opened(self, worker: RemoteWorker) -> None:
        callback = (worker.payload or {}).get("on_success")
        if callback is not None:
            callback(worker.open_result)

    def _first(self, worker: RemoteWorker) -> None:
        event = (worker.payload or {}).get("first")
        if event is not None:
            event.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Tell the child to stop (it exits at once) and wait for its last counters."""
        with self._lock:
            if self._stopped:
                return
        self._send({"op": "stop"})
        with self._lock:
            self._stopped = True
            try:
                self._in.close()
            except OSError:
                pass
        self._reader.join(timeout)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._kill()

    def _kill(self) -> None:
        with self._lock:
            self._stopped = True
        try:
            self.proc.kill()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass

    # -- the child's messages --------------------------------------------------------------------
    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                self._on_event(json.loads(line))
            except Exception:  # noqa: BLE001 - a bad line must not end the reader
                log.exception("tracking-core could not read a message of its delivery process")
        self._ended(proc)

    def _ended(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            waiting = list(self._waiting.values())
            self._waiting.clear()
            stopped = self._stopped
        for done, _ in waiting:
            done.set()
        if stopped or not self._started:
            self.alive_or_done = False
            self._ready.set()
            return
        try:
            code = proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        if self.restarts >= MAX_RESTARTS:
            self.alive_or_done = False
            log.warning(
                "tracking-core's delivery process ended unexpectedly (exit code %s) after %d "
                "restarts; what this process logs from now on stays in its journal: run "
                "`tracking-core sync`",
                code,
                self.restarts,
            )
            return
        self.restarts += 1
        log.warning(
            "tracking-core's delivery process ended unexpectedly (exit code %s); starting it "
            "again (%d of %d): it resumes from the journal",
            code,
            self.restarts,
            MAX_RESTARTS,
        )
        for worker in self.workers.values():
            worker.carry_over()
        # A backend that opened the run (or a secondary's) attaches; one still opening opens.
        actions = {
            name: "attach" if action == "attach" or self.workers[name].opened else "open"
            for name, action in self._actions.items()
        }
        self._spawn(actions)

    def _on_event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("ev")
        worker = self.workers.get(event.get("b", ""))
        if kind == "status":
            self.rows_seen = int(event["rows"])
            for name, state in event["backends"].items():
                self.workers[name].update(state)
        elif kind == "done":
            with self._lock:
                done, reply = self._waiting.pop(int(event["id"]), (None, None))
            if done is not None and reply is not None:
                reply.update(event)
                done.set()
        elif kind == "log":
            logging.getLogger(event["name"]).log(int(event["level"]), "%s", event["msg"])
        elif kind == "opened" and worker is not None:
            with self._lock:
                if worker.opened:
                    return  # attached again after a restart: the run's entry is unchanged
                worker.opened, worker.open_result = True, event.get("result")
                known = worker.payload is not None
            if known:
                self._opened(worker)
        elif kind == "first" and worker is not None:
            with self._lock:
                worker.first = True
                known = worker.payload is not None
            if known:
                self._first(worker)
        elif kind == "ready":
            self._ready.set()


def start_delivery_process(
    specs: Sequence[BackendSpec],
    contexts: Mapping[str, RunContext],
    *,
    journal: str,
    handle: RunHandle,
    prefix: str,
    actions: Mapping[str, str],
    flush_interval: float,
    exit_timeout: float,
    on_spawn: Callable[[int], None] | None = None,
) -> DeliveryProcess:
    """Start the child for one writing process: it builds ``specs`` with ``contexts``, runs
    ``actions`` (``open`` or ``attach`` per backend) and then follows ``journal``;
    ``on_spawn`` hears the pid of every child started (the first and any restarted one)."""

    def setup(current: Mapping[str, str]) -> dict[str, Any]:
        return {
            "journal": journal,
            "handle": handle.to_json(),  # as it is now: a restarted child attaches with it
            "prefix": prefix,
            "flush_interval": flush_interval,
            "exit_timeout": exit_timeout,
            "argv": list(getattr(sys, "argv", []) or []),
            "log_level": logging.getLogger("tracking_core").getEffectiveLevel(),
            "backends": [
                {"name": s.name, "context": context_json(contexts[s.name]), "action": current.get(s.name)}
                for s in specs
            ],
        }

    return DeliveryProcess(
        setup, {s.name: actions.get(s.name, "attach") for s in specs}, on_spawn=on_spawn
    )
