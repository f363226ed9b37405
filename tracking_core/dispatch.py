"""Dispatch: the caller enqueues, each backend's own worker thread delivers.

The training thread only appends a tuple to a deque (a few hundred nanoseconds). A worker per
backend wakes every ``flush_interval`` seconds (or when asked to flush), turns the queued rows into
:class:`~tracking_core.records.MetricRecord` batches and calls that backend's hooks alone, so a slow
or failing tracker never delays the caller or another backend. A call that raises is retried with
backoff; every kind of failure is reported once and then counted, and the counts appear in the
finish summary.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .context import RunContext
from .records import ConfigSection, MetricRecord

log = logging.getLogger("tracking_core.dispatch")

#: A metric row as the caller enqueues it: (first seq, timestamp, metrics, step, step key, prefix, role)
Row = tuple[int, float, Mapping[str, Any], "int | None", "str | None", str, "str | None"]

DEFAULT_FLUSH_INTERVAL = 0.5
MAX_BATCH = 1000


def to_float(value: Any) -> float | None:
    """A metric value as float (Python numbers, numpy and torch scalars), or None if it is not one."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)
    if item is not None:
        try:
            value = item()
        except Exception:  # noqa: BLE001 - a non-scalar tensor or array
            return None
        if isinstance(value, (int, float, bool)):
            return float(value)
    return None


def expand_rows(rows: list[Row], skipped: Counter[str]) -> list[MetricRecord]:
    """Turn queued rows into records; a value that is not a number is counted in ``skipped``."""
    out: list[MetricRecord] = []
    for seq, ts, metrics, step, step_key, prefix, role in rows:
        i = seq
        for key, raw in metrics.items():
            value = to_float(raw)
            if value is None:
                skipped[f"{prefix}{key}"] += 1
                i += 1
                continue
            out.append(MetricRecord(str(key), value, step, ts, i, role, prefix, step_key))
            i += 1
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
                "backend %r failed in %s (%s: %s); tracking goes on, the call is retried and "
                "further failures of this kind are counted",
                self.backend,
                what,
                type(exc).__name__,
                exc,
            )
        self.counts[kind] += 1


class BackendWorker:
    """Delivers one backend's calls on its own daemon thread, in the order they were queued.

    The queue holds metric rows and control items (``open``, ``attach``, ``config``, ``close``)
    in one deque, so a config logged before a metric is delivered before it. A metric batch that
    fails stays at the head of the line and is retried (with backoff) until it is acknowledged.
    """

    def __init__(
        self,
        name: str,
        call: Callable[..., Any],
        context: RunContext,
        *,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        max_batch: int = MAX_BATCH,
        max_retry_delay: float = 5.0,
    ) -> None:
        self.name = name
        self._call = call
        self.context = context
        self.flush_interval = flush_interval
        self.max_batch = max_batch
        self.max_retry_delay = max_retry_delay
        self.queue: deque[tuple[str, Any]] = deque()
        self.pending: list[MetricRecord] = []
        self._wake = threading.Event()
        self._idle = threading.Condition()
        self._busy = False
        self._stop = threading.Event()
        self.failures = FailureLog(name)
        self.skipped: Counter[str] = Counter()
        self.delivered = 0
        self._thread = threading.Thread(
            target=self._loop, name=f"tracking-core-{name}", daemon=True
        )
        self._thread.start()

    # -- caller side ---------------------------------------------------------------------------
    def put_row(self, row: Row) -> None:
        """Queue a metric row (the hot path: one deque append, no lock, no wake-up)."""
        self.queue.append(("row", row))

    def submit(self, kind: str, payload: Any = None) -> threading.Event:
        """Queue a control item after everything queued so far; the event is set once it ran."""
        done = threading.Event()
        self.queue.append((kind, (payload, done)))
        self._wake.set()
        return done

    def flush(self, timeout: float | None) -> bool:
        """Deliver everything queued so far; True when nothing is left within ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._busy or self.queue or self.pending:
                remaining = None if deadline is None else deadline - time.monotonic()
                if self._stop.is_set() or (remaining is not None and remaining <= 0):
                    return False
                self._wake.set()
                self._idle.wait(0.05 if remaining is None else min(0.05, remaining))
        return True

    def backlog(self) -> int:
        """Records not yet acknowledged (queued rows count as one each)."""
        return sum(1 for kind, _ in self.queue if kind == "row") + len(self.pending)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    # -- worker side ---------------------------------------------------------------------------
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

    def _drain(self) -> None:
        while not self._stop.is_set():
            if not self.pending:
                rows: list[Row] = []
                while self.queue and self.queue[0][0] == "row" and len(rows) < self.max_batch:
                    rows.append(self.queue.popleft()[1])
                if rows:
                    self.pending = expand_rows(rows, self.skipped)
                    continue
                if not self.queue:
                    return
                kind, (payload, done) = self.queue.popleft()
                try:
                    self._run_control(kind, payload)
                finally:
                    done.set()
                continue
            batch = self.pending[: self.max_batch]
            if not self._retrying("log_metrics", records=batch):
                return
            self.delivered += len(batch)
            del self.pending[: len(batch)]

    def _run_control(self, kind: str, payload: Any) -> None:
        if kind == "open":
            payload["ok"] = self._retrying("open_run", attempts=3)
            payload["result"] = self._last_result if payload["ok"] else None
        elif kind == "attach":
            payload["ok"] = self._retrying("attach_run", attempts=3, attach=payload["attach"])
            payload["result"] = self._last_result if payload["ok"] else None
        elif kind == "config":
            section: ConfigSection = payload
            self._retrying("log_config", attempts=5, config=section, role=section.role)
        elif kind == "close":
            self._retrying("close_run", attempts=2, status=payload)
        elif kind == "call":  # an arbitrary callable run in order on this worker (tests, sync)
            payload()

    _last_result: Any = None

    def _retrying(self, hook: str, attempts: int | None = None, **kwargs: Any) -> bool:
        """Call ``hook`` until it succeeds, ``attempts`` run out, or the worker is stopped.

        ``attempts`` None retries for as long as the worker lives (metric batches are never
        dropped); the delay grows from 0.1 s to ``max_retry_delay``.
        """
        delay = 0.1
        tries = 0
        while not self._stop.is_set():
            tries += 1
            try:
                self._last_result = self._call(hook, run=self.context, **kwargs)
                return True
            except Exception as exc:  # noqa: BLE001 - failure isolation
                self.failures.record(hook, exc)
                if attempts is not None and tries >= attempts:
                    return False
            if self._stop.wait(delay):
                return False
            delay = min(delay * 2, self.max_retry_delay)
        return False
