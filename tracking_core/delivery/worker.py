"""One backend's delivery: its instance, called through pluggy, and the thread that feeds it.

A :class:`BackendWorker` opens (or attaches to) the run in its backend, then takes the journal's
records from its own :class:`~tracking_core.delivery.stream.Stream` in order and hands them over
in batches: rows as :func:`log_metrics`, config sections as :func:`log_config`, the end as
:func:`close_run`. Each delivered batch moves the backend's acknowledgement forward.

When a call fails it is retried with a growing delay (0.1 s up to ``max_retry_delay``); after
:data:`BREAKER_THRESHOLD` failures in a row the backend's **circuit is open**: it is probed once
per delay while its records wait in the journal. Each kind of failure is reported once, then
counted. A batch that keeps failing is **isolated**: its records are tried one by one (a lone
record or a config against the next batch) and, if the backend takes the others, what it keeps
refusing is set aside — a metric value is *rejected* (reported once with its key, counted, and
skipped for this backend only), a config section is *owed* (kept for ``tracking-core sync``).
When nothing gets through, the backend is down, not the data: the records wait.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pluggy

from .. import hookspecs, lifecycle, settings
from ..context import RunContext
from ..errors import RunNotOpenYet
from ..plugins import PluginManager
from ..records import MetricRecord, RunStatus
from ..registry import BackendSpec
from . import kinds
from .entries import End, Entry, decode
from .failures import failure
from .journal import Acks
from .progress import BackendProgress
from .stream import Stream
from .writers import Counts, Publisher, await_writers, identity, owing_text

log = logging.getLogger("tracking_core.delivery")

MAX_BATCH = 1000
BREAKER_THRESHOLD = 3
#: Failures of one batch after which its records are tried one by one (before the breaker
#: opens: a batch the tracker refuses is bad data, not a tracker that is down).
ISOLATE_AFTER = 2
MAX_RETRY_DELAY = 10.0
#: How often an attach waiting for the primary's open is tried again, and after how long the
#: wait is reported as a failure.
NOT_OPEN_POLL = 1.0
NOT_OPEN_GRACE = 60.0
#: How long a drain waits for the primary to open the run before it counts the tracker as down.
NOT_OPEN_PATIENCE = 3.0
#: Records of one row get consecutive ``MetricRecord.seq`` numbers inside a span of this size.
ROW_SPAN = kinds.ROW_SPAN
#: How many records a worker reads from its stream at a time.
READ_AHEAD = 512


records_of = kinds.metric_records
#: What journal entries count for (each metric value, each rich record): see :func:`kinds.count`.
count_values = _values = kinds.count

#: A rich record the backend has no hook for (nor a fallback): set aside, counted.
_UNSUPPORTED = object()


@dataclass
class FailureLog:
    """Each kind of failure reported the first time, then counted."""

    backend: str
    counts: Counter[str] = field(default_factory=Counter)

    def record(self, what: str, exc: BaseException, then: str = "the call is retried") -> None:
        kind = f"{what}: {type(exc).__name__}"
        if kind not in self.counts:
            # The same cause in another hook is said in one short line (see .failures).
            log.warning(
                "backend %r failed in %s (%s: %s); training goes on, %s and further failures of "
                "this kind are only counted",
                self.backend,
                what,
                type(exc).__name__,
                exc,
                then,
                extra=failure(self.backend, what, exc),
            )
        self.counts[kind] += 1


class BackendSlot:
    """A selected backend in one process: built on first use, registered as a plugin under its
    name for the life of the run, and called through a plugin manager of its own that holds
    only this instance, so that every call goes through pluggy (traced with
    ``TRACKING_CORE_TRACE_PLUGINS``, ``firstresult`` honoured) and reaches no other backend.

    ``on_call(backend, hook)`` is told before each call into the tracker's code (building its
    instance included) and ``on_call(backend, None)`` after it: a delivery process says so to the
    process that started it, which then knows whose code was running if the process dies."""

    def __init__(
        self,
        spec: BackendSpec,
        context: RunContext,
        manager: PluginManager,
        on_call: Callable[[str, str | None], None] | None = None,
    ) -> None:
        self.spec = spec
        self.context = context
        self.manager = manager
        self.on_call = on_call
        self.instance: Any = None
        self.plugin_name: str | None = None
        self._pm: pluggy.PluginManager | None = None

    def _build(self) -> pluggy.PluginManager:
        instance = self.spec.resolve_factory()(self.context)
        name = self.spec.name
        n = 1
        while self.manager.pm.get_plugin(name) is not None or name in self.manager.plugins:
            n += 1
            name = f"{self.spec.name}#{n}"
        if not self.manager.register(instance, name):
            info = self.manager.plugins.pop(name, None)
            raise TypeError(
                f"backend {self.spec.name!r} (plugin {self.spec.plugin!r}) built an invalid "
                f"instance: {info.error if info else 'rejected by the plugin manager'}"
            )
        pm = pluggy.PluginManager(hookspecs.PROJECT)
        pm.add_hookspecs(hookspecs)
        pm.register(instance, name=name)
        if settings.get(settings.TRACE_PLUGINS):
            trace = logging.getLogger("tracking_core.trace")
            pm.trace.root.setwriter(lambda msg: trace.info(msg.rstrip()))
            pm.enable_tracing()
        self.instance, self.plugin_name, self._pm = instance, name, pm
        return pm

    def call(self, hook: str, **kwargs: Any) -> Any:
        """Call this backend's ``hook`` with every argument of its spec; the first result."""
        pm = self._pm or self._watched(self._build, "its constructor")
        return self._watched(lambda: self._first(getattr(pm.hook, hook)(**kwargs)), hook)

    def _watched(self, call: Callable[[], Any], what: str) -> Any:
        if self.on_call is None:
            return call()
        self.on_call(self.spec.name, what)
        try:
            return call()
        finally:
            self.on_call(self.spec.name, None)

    @staticmethod
    def _first(result: Any) -> Any:
        if isinstance(result, list):  # not a firstresult hook
            return result[0] if result else None
        return result

    def implements(self, hook: str) -> bool:
        """Whether this backend has an implementation of ``hook``."""
        pm = self._pm or self._watched(self._build, "its constructor")
        return bool(getattr(pm.hook, hook).get_hookimpls())

    def release(self) -> None:
        """Unregister the instance: a backend is a plugin only for the life of its run."""
        if self.plugin_name is not None:
            self.manager.unregister(self.plugin_name)
            self.plugin_name = None


class BackendWorker:
    """Delivers one backend's share of a journal on its own daemon thread (see the module doc).

    ``action`` is ``open`` (the primary opens the run at ``entry``, its target) or ``attach``
    (``entry`` is the backend's entry in the run handle); ``on_opened`` hears the result.
    """

    def __init__(
        self,
        slot: BackendSlot,
        stream: Stream,
        acks: Acks,
        *,
        action: str,
        entry: Mapping[str, Any],
        prefix: str,
        poll: float,
        on_opened: Callable[[str, Any], None] | None = None,
        max_retry_delay: float = MAX_RETRY_DELAY,
        handle_file: Path | None = None,
        writer: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = slot.spec.name
        self.slot = slot
        self.context = slot.context
        self.stream = stream
        self.acks = acks
        self.action = action
        self.entry = dict(entry)
        self.prefix = prefix
        self.poll = poll
        self.on_opened = on_opened
        self.handle_file = handle_file
        self.max_batch = slot.spec.max_batch or MAX_BATCH
        self.batch_interval = slot.spec.batch_interval or 0.0
        self.max_retry_delay = max_retry_delay
        self.failures = FailureLog(self.name)
        self.ready = False
        self.final = False
        self.consecutive_failures = 0
        self.attempts = 0
        self.down_since: float | None = None
        self.owed_sections: dict[int, str] = {}
        # Config records a previous delivery set aside (owed): offered again when the stream
        # reaches them, and a drain waits for that retry. Not yet read / read and in flight.
        self._owed_unseen: set[int] = set(self.progress.owed)
        self._owed_retrying: set[int] = set()
        self._pending: deque[Entry] = deque()
        self._last_delivery = 0.0
        self._urgent = 0
        self._probe_now = False
        self._waiting_since: float | None = None
        self._isolating = False
        self._rejected_keys: set[str] = set()
        self._fallbacks: set[str] = set()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._progress = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"tracking-core-{self.name}", daemon=True)
        # The writer registry (see .writers): who this writer is (``writer``: the journal's
        # writer, gone, whose journal a replay delivers: only its final state is published).
        self._publisher: Publisher | None = None
        self._who = dict(writer) if writer is not None else None
        self._closing = threading.Event()  # the follower finishes: ``_writers_until`` is set
        self._writers_until = 0.0
        self._verdict: tuple[RunStatus, dict[str, dict[str, Any]]] | None = None
        self._done_ts = 0.0  # the log time of the newest record done
        #: writers of the job that still owed data when this primary closed the run here
        self.owing: dict[str, dict[str, Any]] = {}

    def start(self) -> None:
        self._thread.start()

    @property
    def circuit_open(self) -> bool:
        return self.consecutive_failures >= BREAKER_THRESHOLD

    @property
    def progress(self) -> BackendProgress:
        return self.acks.progress[self.name]

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def closing(self, writers_until: float) -> None:
        """The follower finishes: a primary may wait for the job's other writers (see
        :mod:`.writers`) until ``writers_until`` (monotonic) before it closes the run."""
        self._writers_until = writers_until
        self._closing.set()

    # -- waiting for it ---------------------------------------------------------------------
    def drain(self, target_n: int, deadline: float | None, *, wait_for_open: bool = False) -> bool:
        """Wait until every record up to ``target_n`` is done; False at ``deadline``, or as soon
        as the backend is down (its circuit open) and one more probe since this call failed.
        While the primary has not opened the run here yet, a drain gives it a little patience,
        or (``wait_for_open``: a flush, whose records have nowhere else to go) up to ``deadline``."""
        with self._progress:
            self._urgent += 1
            probe_mark = self.attempts
            self._probe_now = True
        self._wake.set()
        try:
            with self._progress:
                while not self.progress.reached(target_n) or self._retrying_owed():
                    if self._stop.is_set() and not self._thread.is_alive():
                        return False
                    if self._gave_up(probe_mark, wait_for_open):
                        return False  # down (or not open yet), and probed once since
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._progress.wait(0.05 if remaining is None else min(0.05, remaining))
            return True
        finally:
            with self._progress:
                self._urgent -= 1

    def _retrying_owed(self) -> bool:
        """Whether a config owed from an earlier delivery is still to be offered again."""
        return bool(self._owed_unseen or self._owed_retrying)

    def _gave_up(self, probe_mark: int, wait_for_open: bool) -> bool:
        """Whether a drain stops waiting: the tracker is down (its circuit open, or it cannot
        be opened) and was probed once since the drain began. Waiting for the primary to open
        the run is given a little patience first (the primary may just be slower), or, with
        ``wait_for_open``, as long as the drain's deadline allows."""
        if self.attempts <= probe_mark or self._isolating:
            return False
        if self.circuit_open:
            return True
        if self.ready:
            return False
        waiting = self._waiting_since
        if waiting is None:
            return True
        return not wait_for_open and time.monotonic() - waiting >= NOT_OPEN_PATIENCE

    # -- the thread -------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if not self._connect():
                return
            try:
                self._start_publishing()
            except Exception:  # noqa: BLE001 - the registry never holds up a record
                log.exception("tracking-core's writer registry hit an internal error in %r", self.name)
                self._publisher = None
            while not self._stop.is_set():
                batch = self._next_batch()
                if not batch:
                    self._tick(caught_up=not self._pending)
                    self._wake.wait(self.poll)
                    self._wake.clear()
                    continue
                self._deliver(batch)
                self._tick(caught_up=False)
            if self._closing.is_set() and self._publisher is not None and not self._publisher.final:
                self._publisher.closed(self._counts(), complete=False)  # the close did not get through
        except Exception:  # noqa: BLE001 - the worker must never die silently
            log.exception("tracking-core's worker for %r hit an internal error", self.name)

    def _attach_entry(self) -> dict[str, Any]:
        """The entry to attach with: while the primary's open was not known when this process
        started, the saved run handle may know it by now; a backend without a target has
        nothing to attach to until then (raises: the attach is retried)."""
        if self.handle_file is not None:
            from ..handle import RunHandle

            try:
                saved = RunHandle.parse(self.handle_file)
            except ValueError:
                saved = None
            if saved is not None and self.name not in saved.pending and self.name in saved.backends:
                self.entry, self.handle_file = dict(saved.backends[self.name]), None
            elif not self.entry:
                raise RunNotOpenYet(
                    f"the run is not open in {self.name!r} yet (the primary has not reached it); "
                    "records wait in the journal"
                )
        return self.entry

    def _connect(self) -> bool:
        hook = "open_run" if self.action == "open" else "attach_run"
        delay = 0.1
        while not self._stop.is_set():
            kwargs: dict[str, Any] = {"run": self.context}
            try:
                if hook == "open_run":
                    kwargs["target"] = self.entry
                else:
                    kwargs["attach"] = self._attach_entry()
            except RunNotOpenYet as exc:
                ok, result = False, exc
                self._not_open(hook, exc)
            else:
                ok, result = self._try(hook, **kwargs)
            if isinstance(result, RunNotOpenYet):
                self._sleep(min(delay, NOT_OPEN_POLL))
                delay = min(delay * 2, NOT_OPEN_POLL)
                continue
            if ok:  # ready since the call returned (see _try)
                self._waiting_since = None
                # A tracker in this process (thread delivery) registers its own exit teardown
                # when it opens: ours must still run first.
                lifecycle.exit_hook_last()
                if self.on_opened is not None and result is not None:
                    self.on_opened(self.name, result)
                return True
            self._sleep(delay)
            delay = min(delay * 2, self.max_retry_delay)
        return False

    def _not_open(self, hook: str, exc: RunNotOpenYet) -> None:
        """The primary has not opened the run here yet: a wait, reported only when it lasts."""
        with self._progress:
            self.attempts += 1
            self._progress.notify_all()
        if self._waiting_since is None:
            self._waiting_since = time.monotonic()
        elif time.monotonic() - self._waiting_since > NOT_OPEN_GRACE:
            self.failures.record(hook, exc)

    def _sleep(self, delay: float) -> None:
        """Back off; a drain that starts while the circuit is open gets its probe at once."""
        deadline = time.monotonic() + delay
        while not self._stop.is_set():
            if self._probe_now and (self.circuit_open or not self.ready):
                self._probe_now = False
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wake.wait(remaining)
            self._wake.clear()

    def _fill(self) -> None:
        if not self._pending:
            progress = self.progress
            taken = self.stream.take(READ_AHEAD, final=self.final)
            for line in taken:
                n = line["n"]
                if not progress.done(n):
                    self._pending.append(decode(line))
                if self._owed_unseen:
                    with self._progress:
                        if n in self._owed_unseen:
                            self._owed_retrying.add(n)
                        # An owed record the stream went past without finding (a damaged
                        # line) will not come: nothing to wait for.
                        self._owed_unseen = {x for x in self._owed_unseen if x > n}
            if not taken and self.final and self._owed_unseen:
                with self._progress:
                    self._owed_unseen.clear()

    def _next_batch(self) -> list[Entry]:
        self._fill()
        pending = self._pending
        if not pending:
            return []
        kind = kinds.of(pending[0])
        if not kind.batched:
            return [pending.popleft()]
        if self._hold_back():
            return []
        # Consecutive entries of a batched kind (metric rows), up to max_batch values.
        entry_type, count = kind.entry, kind.values
        batch: list[Entry] = []
        values = 0
        while pending and type(pending[0]) is entry_type and values < self.max_batch:
            entry = pending.popleft()
            batch.append(entry)
            values += count(entry)
            if not pending:
                self._fill()
        return batch

    def _hold_back(self) -> bool:
        """Let rows gather a while longer for a backend whose every call costs much
        (``batch_interval``), unless a full batch waits, a non-row is queued or a drain runs."""
        if not self.batch_interval or self._urgent:
            return False
        if time.monotonic() - self._last_delivery >= self.batch_interval:
            return False
        if any(not kinds.of(e).batched for e in self._pending):
            return False
        return kinds.count(self._pending) < self.max_batch

    # -- delivering -------------------------------------------------------------------------
    def _try(self, hook: str, **kwargs: Any) -> tuple[bool, Any]:
        """One call; failures are counted, reported once per kind, and feed the breaker.

        ``attempts`` counts calls that have *returned* (a drain judges the tracker by them: a
        call still in flight says nothing yet), and a successful open or attach makes the
        backend ready in the same step."""
        try:
            result = self.slot.call(hook, **kwargs)
        except RunNotOpenYet as exc:
            self._not_open(hook, exc)
            return False, exc
        except Exception as exc:  # noqa: BLE001 - failure isolation
            self.failures.record(hook, exc)
            if not self._isolating:  # isolation judges the tracker's health itself
                self._failed_again()
            with self._progress:
                self.attempts += 1
                self._progress.notify_all()
            return False, exc
        with self._progress:
            if hook in ("open_run", "attach_run"):
                self.ready = True
            self.attempts += 1
        if self.down_since is not None:
            log.warning(
                "backend %r is back after %.1f s; delivering what it missed",
                self.name,
                time.monotonic() - self.down_since,
            )
            self.down_since = None
        self.consecutive_failures = 0
        return True, result

    def _failed_again(self, times: int = 1) -> None:
        before = self.consecutive_failures
        self.consecutive_failures += times
        if before < BREAKER_THRESHOLD <= self.consecutive_failures:
            self.down_since = time.monotonic()
            log.warning(
                "backend %r failed %d times in a row: bypassed for now, probing every "
                "%.0f s at most; its records wait in the journal",
                self.name,
                self.consecutive_failures,
                self.max_retry_delay,
            )

    def _call(self, batch: list[Entry]) -> tuple[bool, Any]:
        """Hand a batch to the backend through its kind's hook (see :mod:`.kinds`): the end
        closes the run; an optional kind's hook the backend lacks is replaced by its fallback."""
        kind = kinds.of(batch[0])
        if kind.closes:
            return self._close(cast(End, batch[0]))
        try:
            records = [r for e in batch for r in kind.records(e, self.prefix, self.context.role)]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return False, exc  # a damaged entry: isolated and counted like a refused one
        if kind.hook is None:
            return True, None  # a record kind this version does not know: nothing to deliver
        if kind.optional and not self.slot.implements(kind.hook):
            return self._fall_back(kind, records[0])
        return self._try(kind.hook, **kind.arguments(records), run=self.context)

    # -- the writer registry (see .writers) ---------------------------------------------------
    def _close(self, entry: End) -> tuple[bool, Any]:
        """The run's end: a secondary detaches; a primary first learns which of the job's
        writers still owe data and closes FAILED instead of the status it meant while any does.
        The writer's final state is published before the end is acknowledged."""
        meant = RunStatus(entry.status or RunStatus.KILLED.value)
        owing: dict[str, dict[str, Any]]
        status, owing = RunStatus.FINISHED, {}  # a secondary only detaches
        if self.context.primary:
            status, owing = self._verdict_on(meant, float(entry.timestamp or time.time()))
        ok, result = self._try("close_run", status=status, run=self.context)
        if ok and self._publisher is not None:
            try:
                extra: dict[str, Any] = {}
                if owing:
                    extra = {"incomplete": {label: owing_text(e) for label, e in owing.items()}, "intended_status": meant.value}
                self._publisher.closed(self._counts(), complete=not self.progress.owes_config(), **extra)
            except Exception:  # noqa: BLE001 - the registry never keeps the end from its ack
                log.exception("tracking-core's writer registry hit an internal error in %r", self.name)
        return ok, result

    def _verdict_on(self, meant: RunStatus, since: float) -> tuple[RunStatus, dict[str, dict[str, Any]]]:
        """The status to close with, and the writers that still owe data (once: a retried close
        keeps it). The wait is for a run meant to be FINISHED only, and never in a replay."""
        if self._verdict is None:
            owing: dict[str, dict[str, Any]] = {}
            if self._implements("read_writers"):
                # The follower says when it finishes (it may do so just after the end arrives).
                self._closing.wait(NOT_OPEN_PATIENCE)
                until = self._writers_until if meant is RunStatus.FINISHED else 0.0
                try:
                    owing = await_writers(
                        self._read_writers,
                        own=str((self._who or {}).get("label") or self.context.label),
                        tracking_dir=self.context.tracking_dir,
                        since=since,
                        until=until,
                        stop=self._stop,
                    )
                except Exception:  # noqa: BLE001 - the registry never keeps a run from closing
                    log.exception("tracking-core could not judge the writers of run %s in %r", self.context.run_id, self.name)
            self.owing = owing
            failed = bool(owing) and meant is RunStatus.FINISHED
            self._verdict = (RunStatus.FAILED if failed else meant, owing)
        return self._verdict

    def _implements(self, hook: str) -> bool:
        try:
            return self.slot.implements(hook)
        except Exception:  # noqa: BLE001 - its constructor failed: it has no hooks then
            return False

    def _read_writers(self) -> Mapping[str, Mapping[str, Any]] | None:
        try:
            found = self.slot.call("read_writers", run=self.context)
        except Exception as exc:  # noqa: BLE001 - a registry that cannot be read is none
            self.failures.record("read_writers", exc, "the writers on other nodes are not waited for")
            return None
        return found if isinstance(found, Mapping) else None

    def _start_publishing(self) -> None:
        """The run is open here: the writer registry, where the backend keeps one, hears that
        this writer writes (a replay publishes only the writer's final state)."""
        if not self._implements("publish_writer"):
            return
        who = self._who or identity(
            label=self.context.label,
            role=self.context.role,
            # A role's writer without a rank is its role's only process: rank 0, as its label says.
            rank=self.context.rank if self.context.rank is not None or not self.context.role else 0,
            pid=self.context.pid,
            tracking_dir=str(self.context.tracking_dir),
        )
        self._publisher = Publisher(who, self._publish, live=self._who is None)
        self._publisher.opened(self._counts())

    def _tick(self, caught_up: bool) -> None:
        if self._publisher is None or self.circuit_open:
            return
        try:
            self._publisher.tick(self._counts(idle=caught_up), caught_up)
        except Exception:  # noqa: BLE001 - the registry never holds up a record
            log.exception("tracking-core's writer registry hit an internal error in %r", self.name)
            self._publisher = None

    def _counts(self, idle: bool = False) -> Counts:
        """How far this backend is with the writer's values: what it read from the journal and
        not delivered yet counts as journaled. ``idle``: it has just found nothing more to read,
        so everything logged one flush interval ago (the writer's pump) is delivered."""
        p = self.progress
        waiting = kinds.count(self._pending)
        through = self._done_ts
        if self._pending:
            first = getattr(self._pending[0], "timestamp", None)
            if isinstance(first, (int, float)):
                through = max(through, float(first) - 0.001)
        elif idle:
            through = max(through, time.time() - self.poll)
        return Counts(p.delivered + p.rejected + waiting, p.delivered, p.rejected, through)

    def _publish(self, state: dict[str, Any]) -> bool:
        """One publication; a failure is reported once per kind and costs nothing else."""
        try:
            self.slot.call("publish_writer", state=state, run=self.context)
        except Exception as exc:  # noqa: BLE001 - the registry never holds up a record
            self.failures.record("publish_writer", exc, "no record waits for it (the next publication says as much)")
            return False
        return True

    def _deliver(self, batch: list[Entry]) -> None:
        delay = 0.1
        tries = 0
        while not self._stop.is_set():
            # From the try after which the batch is isolated, its failure is judged by the
            # isolation (bad data, or a tracker that is down), not counted by the breaker.
            judging = tries + 1 >= ISOLATE_AFTER and not kinds.of(batch[0]).closes
            self._isolating = judging
            try:
                ok, result = self._call(batch)
                if ok and result is _UNSUPPORTED:
                    self._unsupported(batch)
                    return
                if ok:
                    self._done(batch, delivered=_values(batch))
                    return
                tries += 1
                if judging and self._isolate(batch):
                    return
            finally:
                self._isolating = False
            self._sleep(delay)
            delay = min(delay * 2, self.max_retry_delay)

    def _fall_back(self, kind: kinds.Kind, record: Any) -> tuple[bool, Any]:
        """A record of a kind whose hook the backend lacks: through the kind's first fallback
        the backend has (see the hookspecs), else set aside (counted)."""
        for fallback in kind.fallbacks:
            if self.slot.implements(fallback.hook):
                self._fallback_once(kind, fallback.how)
                return self._try(fallback.hook, **fallback.arguments(record), run=self.context)
        return True, _UNSUPPORTED

    def _fallback_once(self, kind: kinds.Kind, how: str) -> None:
        if kind.name not in self._fallbacks:
            self._fallbacks.add(kind.name)
            log.warning("backend %r has no %s hook: its %s go to it %s", self.name, kind.hook, kind.noun, how)

    def _done(self, batch: list[Entry], delivered: int = 0, rejected: int = 0, owed: bool = False) -> None:
        progress = self.progress
        numbers = {e.n for e in batch}
        still_owed = [n for n in progress.owed if n not in numbers]
        if owed:
            still_owed += sorted(numbers)
        # Config sections delivered, counted apart from values (as the summary counts those owed).
        configs = len(numbers) if not (delivered or rejected or owed) and kinds.of(batch[0]).owed else 0
        self.acks.update(
            self.name,
            n=max(progress.n, batch[-1].n),
            delivered=progress.delivered + delivered,
            rejected=progress.rejected + rejected,
            owed=still_owed,
            configs=progress.configs + configs,
        )
        with self._progress:
            self._owed_retrying -= numbers
        for n in numbers:
            if owed and kinds.of(batch[0]).owed:
                self.owed_sections[n] = str(getattr(getattr(batch[0], "section", None), "namespace", None))
            elif not owed:
                self.owed_sections.pop(n, None)
        stamp = getattr(batch[-1], "timestamp", None)
        if isinstance(stamp, (int, float)):
            self._done_ts = max(self._done_ts, float(stamp))
        # Saved now, not at the next housekeeping: a delivery process killed right after a
        # delivery must not send it again.
        self.acks.save()
        self._last_delivery = time.monotonic()
        with self._progress:
            self._progress.notify_all()

    def _isolate(self, batch: list[Entry]) -> bool:
        """Set aside what the backend refuses while it takes the rest; False when it is down or
        there is nothing yet to tell (the batch stays and is retried)."""
        verdict = self._isolate_batch(batch)
        if verdict == "resolved":
            # It took other records: refusals of bad data say nothing about its health.
            self.consecutive_failures = 0
            self.down_since = None
            return True
        # Nothing got through: it is down; or nothing to compare with: a failure like any other.
        self._failed_again(BREAKER_THRESHOLD if verdict == "down" else 1)
        return False

    def _isolate_batch(self, batch: list[Entry]) -> str:
        """``resolved`` (what it refuses is set aside), ``down`` or ``unknown``."""
        kind = kinds.of(batch[0])
        if kind.batched:  # its records one by one
            records = [r for e in batch for r in kind.records(e, self.prefix, self.context.role)]
            if len(records) > 1:
                return self._isolate_records(batch, records)
        probe = self._next_batch_now()
        if not probe or kinds.of(probe[0]).closes:
            # Nothing after it to tell a refusal from an outage (the close is no probe: nothing
            # may follow it): keep retrying; what is left at the end stays in the journal.
            self._pending.extendleft(reversed(probe))
            return "unknown"
        ok, result = self._call(probe)
        if not ok:
            self._pending.extendleft(reversed(probe))
            return "down"
        # The backend took the next batch: it is up, and refuses this one.
        self._set_aside(batch)
        if result is _UNSUPPORTED:
            self._unsupported(probe)
        else:
            self._done(probe, delivered=_values(probe))
        return "resolved"

    def _next_batch_now(self) -> list[Entry]:
        with self._progress:
            self._urgent += 1
        try:
            return self._next_batch()
        finally:
            with self._progress:
                self._urgent -= 1

    def _isolate_records(self, batch: list[Entry], records: list[MetricRecord]) -> str:
        failed: list[tuple[MetricRecord, BaseException]] = []
        delivered = 0
        for record in records:
            ok, exc = self._try("log_metrics", records=[record], run=self.context)
            if ok:
                delivered += 1
            else:
                failed.append((record, exc))
                if not delivered and len(failed) >= BREAKER_THRESHOLD + 1:
                    return "down"  # nothing gets through: down, not bad data
        if not delivered:
            return "down"
        refused = []
        for record, _ in failed:
            ok, again = self._try("log_metrics", records=[record], run=self.context)
            if ok:
                delivered += 1
            else:
                refused.append((record, again))
        for record, exc in refused:
            self._report_rejected(record.name, exc)
        self._done(batch, delivered=delivered, rejected=len(refused))
        return "resolved"

    def _set_aside(self, batch: list[Entry]) -> None:
        ok, exc = self._call(batch)  # one last try now that the backend is known to be up
        kind = kinds.of(batch[0])
        if ok:
            self._done(batch, delivered=_values(batch))
        elif kind.owed:
            namespace = getattr(getattr(batch[0], "section", None), "namespace", None)
            log.warning(
                "backend %r refuses config section %r (%s: %s) while it takes other records; "
                "the section stays in the journal for `tracking-core sync`",
                self.name,
                namespace,
                type(exc).__name__,
                exc,
            )
            self._done(batch, owed=True)
        elif kind.batched:
            records = [r for e in batch for r in kind.records(e, self.prefix, self.context.role)]
            for record in records:
                self._report_rejected(record.name, exc)
            self._done(batch, rejected=len(records))
        else:
            self._report_rejected(self.prefix + kinds.key_of(batch[0]), exc)
            self._done(batch, rejected=1)

    def _unsupported(self, batch: list[Entry]) -> None:
        kind = kinds.of(batch[0])
        if kind.name not in self._fallbacks:
            self._fallbacks.add(kind.name)
            hooks = [str(kind.hook), *(f.hook for f in kind.fallbacks)]
            log.warning(
                "backend %r takes no %s (it has %s): they are skipped for it and counted as "
                "rejected in the finish summary",
                self.name,
                kind.noun,
                f"neither {' nor '.join(hooks)}" if len(hooks) > 1 else f"no {hooks[0]}",
            )
        self._done(batch, rejected=1)

    def _report_rejected(self, key: str, exc: BaseException) -> None:
        if key not in self._rejected_keys:
            self._rejected_keys.add(key)
            log.warning(
                "backend %r rejects metric %r (%s: %s): its values are skipped for this backend "
                "only and counted in the finish summary",
                self.name,
                key,
                type(exc).__name__,
                exc,
            )

    def report(self) -> dict[str, Any]:
        """This backend's counters for the summary (plain data: it crosses processes)."""
        p = self.progress
        return {
            "n": p.n,
            "delivered": p.delivered,
            "rejected": p.rejected,
            "failures": dict(self.failures.counts),
            "missing_configs": [self.owed_sections.get(n, f"#{n}") for n in p.owed],
            "ready": self.ready,
            "circuit_open": self.circuit_open,
        }
