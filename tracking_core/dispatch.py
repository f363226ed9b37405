"""Dispatch: the caller enqueues; a pump journals; each backend's own worker delivers.

The workers run in the writer's delivery process by default, which follows the journal
(:mod:`tracking_core.remote`, :mod:`tracking_core.delivery_process`); on threads of the training
process with ``delivery="thread"``. Either way they are the :class:`BackendWorker` below.

* The training thread only appends a tuple to a deque (about a microsecond; no lock, no I/O).
* The run's **pump** thread wakes every ``flush_interval`` seconds, converts the values to float,
  appends the rows to the process's journal (so a SIGKILL loses at most one interval) and hands
  them to every backend worker.
* Each **backend worker** has its own thread and bounded queue, turns rows into
  :class:`~tracking_core.records.MetricRecord` batches and calls that backend's hooks alone, in
  order, acknowledging each delivered batch in the journal. A slow backend never delays another.
* A call that raises is retried with backoff; after a few failures in a row the backend's
  **circuit opens**: it is bypassed (one probe per backoff period) while its records wait in the
  journal. A queue that is full **spills**: its rows stay only in the journal and are read back
  from there once the backend catches up. Nothing is dropped and the caller never waits.
* Each kind of failure is reported once, then counted; the counts go into the finish summary.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import lifecycle
from .context import RunContext
from .journal import Journal, JournalReader, progress_path
from .plugins import PluginManager
from .records import MetricRecord
from .registry import BackendSpec
from .slots import BackendSlot

log = logging.getLogger("tracking_core.dispatch")

#: A metric row: (first sequence number, timestamp, {key: value}, step, step key).
Row = tuple[int, float, Mapping[str, Any], "int | None", "str | None"]

DEFAULT_FLUSH_INTERVAL = 0.5
MAX_BATCH = 1000
MAX_QUEUE_ROWS = 20_000
MAX_QUEUE_ENV = "TRACKING_CORE_MAX_QUEUE_ROWS"
BREAKER_THRESHOLD = 3
CONFIG_ATTEMPTS = 8
MAX_RETRY_DELAY = 10.0


def to_float(value: Any) -> float | None:
    """A metric value as float (Python numbers, numpy and torch scalars), or None if it is not one."""
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)
    if item is not None:
        try:
            value = item()
        except Exception:  # noqa: BLE001 - a non-scalar tensor or array
            return None
        if isinstance(value, (int, float)):
            return float(value)
    return None


def expand(rows: list[Row], prefix: str, role: str | None) -> list[MetricRecord]:
    out: list[MetricRecord] = []
    for seq, ts, metrics, step, step_key in rows:
        for i, (key, value) in enumerate(metrics.items()):
            out.append(MetricRecord(key, value, step, ts, seq + i, role, prefix, step_key))
    return out


@dataclass
class FailureLog:
    """Each kind of failure reported the first time, then counted."""

    backend: str
    counts: Counter[str] = field(default_factory=Counter)

    def record(self, what: str, exc: BaseException) -> None:
        kind = f"{what}: {type(exc).__name__}"
        if kind not in self.counts:
            log.warning(
                "backend %r failed in %s (%s: %s); training goes on, the call is retried and "
                "further failures of this kind are only counted",
                self.backend,
                what,
                type(exc).__name__,
                exc,
            )
        self.counts[kind] += 1


class BackendWorker:
    """Delivers one backend's calls on its own daemon thread, in the order they were queued."""

    def __init__(
        self,
        name: str,
        call: Callable[..., Any],
        context: RunContext,
        *,
        prefix: str = "",
        journal: Journal | JournalReader | None = None,
        lock: threading.Lock | None = None,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        max_batch: int = MAX_BATCH,
        max_queue: int | None = None,
        max_retry_delay: float = MAX_RETRY_DELAY,
        batch_interval: float = 0.0,
    ) -> None:
        self.name = name
        self._call = call
        self.context = context
        self.prefix = prefix
        self.journal = journal
        self._lock = lock or threading.Lock()
        self.flush_interval = flush_interval
        self.max_batch = max_batch
        self.max_queue = max_queue or int(os.environ.get(MAX_QUEUE_ENV, MAX_QUEUE_ROWS))
        self.max_retry_delay = max_retry_delay
        self.batch_interval = batch_interval
        self._last_delivery = 0.0
        self._flushing = 0
        self.queue: deque[tuple[str, Any]] = deque()
        self.queued_rows = 0
        self.pending: list[MetricRecord] = []
        self.spilled = False
        self.spill_offset = 0
        self.spills = 0
        self.failures = FailureLog(name)
        self.delivered = 0
        #: Records up to this sequence number were acknowledged before this worker started (a
        #: restarted delivery process reads its journal from the start): they are not resent.
        self.acked_through = -1
        self.consecutive_failures = 0
        self.down_since: float | None = None
        self.ready = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._busy = False
        self._thread = threading.Thread(target=self._loop, name=f"tracking-core-{name}", daemon=True)
        self._thread.start()

    # -- called by the pump (under the dispatcher's lock) ----------------------------------------
    def enqueue_rows(self, rows: list[Row], offset: int) -> None:
        """Queue ``rows`` (journaled at byte ``offset``), or spill them if the queue is full."""
        if self.spilled:
            return
        # Without a journal there is nowhere to spill to: the rows stay in memory.
        if self.journal is not None and self.queued_rows + len(rows) > self.max_queue:
            self.spilled = True
            self.spill_offset = offset
            self.spills += 1
            log.warning(
                "backend %r is behind by %d rows: new rows wait in the journal %s and are "
                "delivered from there when it catches up",
                self.name,
                self.queued_rows,
                self.journal.path,
            )
            return
        self.queue.extend(("row", row) for row in rows)
        self.queued_rows += len(rows)

    def submit(self, kind: str, payload: Any = None) -> threading.Event:
        """Queue a control item after everything queued so far; the event is set once it ran."""
        done = threading.Event()
        self.queue.append((kind, (payload, done)))
        self._wake.set()
        return done

    def wake(self) -> None:
        self._wake.set()

    def flush(self, timeout: float | None) -> bool:
        """Wait until everything queued so far is delivered; False if ``timeout`` ran out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._flushing += 1
        try:
            return self._wait_idle(deadline)
        finally:
            self._flushing -= 1

    def _wait_idle(self, deadline: float | None) -> bool:
        with self._idle:
            while self._busy or self.queue or self.pending or self.spilled:
                remaining = None if deadline is None else deadline - time.monotonic()
                if self._stop.is_set() or (remaining is not None and remaining <= 0):
                    return False
                self._wake.set()
                self._idle.wait(0.05 if remaining is None else min(0.05, remaining))
        return True

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    @property
    def idle(self) -> bool:
        """Nothing queued, nothing pending, nothing spilled: everything handed over is delivered."""
        return not (self._busy or self.queue or self.pending or self.spilled)

    @property
    def circuit_open(self) -> bool:
        return self.consecutive_failures >= BREAKER_THRESHOLD

    # -- worker thread -------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            with self._idle:
                self._busy = True
            try:
                self._drain()
            except Exception:  # noqa: BLE001 - the worker must never die
                log.exception("tracking-core worker for %r hit an internal error", self.name)
            finally:
                with self._idle:
                    self._busy = False
                    self._idle.notify_all()

    def _hold_back(self) -> bool:
        """Whether to let metric rows accumulate a while longer (``batch_interval``): a backend
        whose every call has a large fixed cost gets fewer, fuller batches, unless a full batch is
        waiting, a control item is queued, or the run is flushing."""
        if not self.batch_interval or self._flushing or self.pending:
            return False
        if time.monotonic() - self._last_delivery >= self.batch_interval:
            return False
        if any(kind != "row" for kind, _ in self.queue):
            return False
        return sum(len(item[2]) for _, item in self.queue) < self.max_batch

    def _drain(self) -> None:
        if self._hold_back():
            return
        while not self._stop.is_set():
            if self.pending:
                batch = self.pending[: self.max_batch]
                if not self._retrying("log_metrics", records=batch):
                    return
                self.delivered += len(batch)
                self._last_delivery = time.monotonic()
                del self.pending[: len(batch)]
                if self.journal is not None:
                    self.journal.ack(self.name, batch[-1].seq)
                continue
            rows: list[Row] = []
            records = 0
            while self.queue and self.queue[0][0] == "row" and records < self.max_batch:
                rows.append(self.queue.popleft()[1])
                records += len(rows[-1][2])
            if rows:
                self.queued_rows -= len(rows)
                self.pending = expand(rows, self.prefix, self.context.role)
                if self.acked_through >= 0:
                    self.pending = [r for r in self.pending if r.seq > self.acked_through]
                continue
            if self.queue:
                kind, (payload, done) = self.queue[0]
                if kind == "close" and self.spilled:
                    self._catch_up()
                    continue
                self.queue.popleft()
                try:
                    self._run_control(kind, payload)
                finally:
                    done.set()
                continue
            if self.spilled:
                self._catch_up()
                continue
            return

    def _catch_up(self) -> None:
        """Read spilled rows back from the journal; resume live queueing at its end."""
        assert self.journal is not None
        with self._lock:
            rows, offset, at_end = self.journal.read_rows_from(
                self.spill_offset, max(1, self.max_queue // 2)
            )
            self.spill_offset = offset
            # Rows go to the front: anything queued meanwhile is a control item logged later.
            self.queue.extendleft(("row", row) for row in reversed(rows))
            self.queued_rows += len(rows)
            if at_end:
                self.spilled = False

    def _run_control(self, kind: str, payload: Any) -> None:
        if kind in ("open", "attach"):

            def succeeded(result: Any) -> None:
                lifecycle.exit_hook_last()
                callback = payload.get("on_success")
                if callback is not None:
                    callback(result)

            self.ready = self._retrying(
                "open_run" if kind == "open" else "attach_run",
                attempts=None,
                on_first=payload.get("first"),
                on_success=succeeded,
                kwargs_fn=payload["kwargs"],
            )
        elif kind == "config":
            section, config_id = payload
            # Bounded: a config the backend keeps refusing must not hold up the metrics behind
            # it; it stays unacknowledged in the journal for `tracking-core sync`.
            if self._retrying("log_config", attempts=CONFIG_ATTEMPTS, config=section, role=section.role):
                if self.journal is not None and config_id is not None:
                    self.journal.ack_config(self.name, config_id)
        elif kind == "close":
            if self._retrying("close_run", attempts=2, status=payload) and self.journal is not None:
                self.journal.ack_config(self.name, "close")

    def _retrying(
        self,
        hook: str,
        attempts: int | None = None,
        on_first: threading.Event | None = None,
        on_success: Callable[[Any], None] | None = None,
        kwargs_fn: Callable[[], Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> bool:
        """Call ``hook`` until it succeeds, ``attempts`` run out, or the worker is stopped.

        ``attempts`` None retries for as long as the worker lives (nothing is dropped); the delay
        grows from 0.1 s to ``max_retry_delay``: once the circuit is open, that is one probe per
        period while the records wait in the queue and the journal. ``kwargs_fn`` computes
        further arguments anew for every try (it may raise: that try failed); ``on_success``
        sees the result before ``on_first`` is set.
        """
        delay = 0.1
        tries = 0
        while not self._stop.is_set():
            tries += 1
            try:
                extra = kwargs_fn() if kwargs_fn is not None else {}
                result = self._call(hook, run=self.context, **kwargs, **extra)
            except Exception as exc:  # noqa: BLE001 - failure isolation
                self.failures.record(hook, exc)
                self.consecutive_failures += 1
                if self.consecutive_failures == BREAKER_THRESHOLD:
                    self.down_since = time.monotonic()
                    log.warning(
                        "backend %r failed %d times in a row: bypassed for now, probing every "
                        "%.0f s at most; its records wait in the journal",
                        self.name,
                        BREAKER_THRESHOLD,
                        self.max_retry_delay,
                    )
                if on_first is not None:
                    on_first.set()
                if attempts is not None and tries >= attempts:
                    return False
            else:
                if self.down_since is not None:
                    log.warning(
                        "backend %r is back after %.1f s; delivering what it missed",
                        self.name,
                        time.monotonic() - self.down_since,
                    )
                    self.down_since = None
                self.consecutive_failures = 0
                if on_success is not None:
                    on_success(result)
                if on_first is not None:
                    on_first.set()
                return True
            if self._stop.wait(delay):
                return False
            delay = min(delay * 2, self.max_retry_delay)
        return False


class Dispatcher:
    """The run's intake, pump thread and backend workers."""

    def __init__(
        self,
        workers: dict[str, BackendWorker],
        journal: Journal | None,
        lock: threading.Lock,
        prefix: str,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
    ) -> None:
        self.workers = workers
        self.journal = journal
        self.prefix = prefix
        self.flush_interval = flush_interval
        self.intake: deque[Row] = deque()
        self.skipped: Counter[str] = Counter()
        self.logged = 0
        self._lock = lock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tracking-core-pump", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            try:
                self.pump()
                self.write_progress()
            except Exception:  # noqa: BLE001 - never let the pump die
                log.exception("tracking-core pump hit an internal error")

    @property
    def settled(self) -> bool:
        """Everything logged so far is delivered to every backend."""
        return not self.intake and all(w.idle for w in self.workers.values())

    def write_progress(self) -> None:
        """Say, beside the journal, whether this process has delivered everything (refreshed
        every flush interval): a primary finishing the run waits for its peers to settle."""
        if self.journal is None or self.journal.closed:
            return
        path = progress_path(self.journal.path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"updated": time.time(), "settled": self.settled, "pid": os.getpid()}))
        os.replace(tmp, path)

    def pump(self) -> None:
        """Journal what the caller logged since the last pump and hand it to every worker."""
        with self._lock:
            if not self.intake:
                return
            rows: list[Row] = []
            while self.intake:
                seq, ts, metrics, step, step_key = self.intake.popleft()
                values: dict[str, float] = {}
                for key, raw in metrics.items():
                    value = to_float(raw)
                    if value is None:
                        self.skipped[f"{self.prefix}{key}"] += 1
                        continue
                    values[str(key)] = value
                if values:
                    rows.append((seq, ts, values, step, step_key))
                    self.logged += len(values)
            if not rows:
                return
            offset = self.journal.rows(rows) if self.journal is not None else 0
            for worker in self.workers.values():
                worker.enqueue_rows(rows, offset)
                worker.wake()

    def submit(self, kind: str, payload: Any) -> list[threading.Event]:
        """Queue a control item for every worker, after every row logged so far."""
        self.pump()
        return [worker.submit(kind, payload) for worker in self.workers.values()]

    def flush(self, timeout: float | None) -> bool:
        self.pump()
        deadline = None if timeout is None else time.monotonic() + timeout
        ok = True
        for worker in self.workers.values():
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ok = worker.flush(remaining) and ok
        return ok

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for worker in self.workers.values():
            worker.stop()


def local_workers(
    specs: list[BackendSpec],
    manager: PluginManager,
    contexts: Mapping[str, RunContext],
    *,
    prefix: str,
    journal: Journal | JournalReader | None,
    lock: threading.Lock,
    flush_interval: float,
) -> tuple[dict[str, BackendSlot], dict[str, BackendWorker]]:
    """A slot (the backend instance, built on first use) and a worker thread per backend."""
    slots: dict[str, BackendSlot] = {}
    workers: dict[str, BackendWorker] = {}
    for spec in specs:
        slot = BackendSlot(spec, contexts[spec.name], manager)
        slots[spec.name] = slot
        workers[spec.name] = BackendWorker(
            spec.name,
            slot.call,
            contexts[spec.name],
            prefix=prefix,
            journal=journal,
            lock=lock,
            flush_interval=flush_interval,
            max_batch=spec.max_batch or MAX_BATCH,
            batch_interval=spec.batch_interval or 0.0,
        )
    return slots, workers
