"""The ``console`` backend instance: rate-limited lines on stderr, never a wait on the terminal.

The backend's hooks only update a :class:`~tracking_console.view.Board` (no I/O). A writer thread
owns the terminal: it renders the board at most once per interval, and only when something
changed. A terminal, pipe or log collector that stops reading blocks that thread alone: later
views are coalesced into the next one (the board is rendered when the write can go on, never
queued), so nothing piles up and no hook waits. The finish summary is handed to the writer too,
and ``close_run`` waits for it at most :data:`WRITE_BOUND` seconds: a blocked stderr costs a
run's finish that much, not more (the summary is then dropped and counted).

The lines go to the process's standard error (file descriptor 2, as ``sys.stderr`` names it when
the backend opens). With delivery in a helper process (the default), that is the training
process's stderr, inherited: the backend is registered ``terminal=True`` for that.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tracking_core.plugin_api import (
    ArtifactRecord,
    ConfigSection,
    HistogramRecord,
    MetricRecord,
    RunContext,
    RunStatus,
    TableRecord,
    TextRecord,
    hookimpl,
)

from .view import Board, fmt_value

log = logging.getLogger("tracking_core.backends.console")

DEFAULT_INTERVAL = 5.0
MIN_INTERVAL = 0.05
#: The longest ``close_run`` waits for the finish summary to be written (seconds).
WRITE_BOUND = 1.0
INTERVAL_ENV = "TRACKING_CORE_CONSOLE_INTERVAL"

_boards_lock = threading.Lock()
_boards: dict[tuple[str, int], _Console] = {}


def interval_of(run: RunContext) -> float:
    """``--console-interval``, else ``$TRACKING_CORE_CONSOLE_INTERVAL``, else 5 seconds."""
    raw = run.option("console_interval", INTERVAL_ENV, DEFAULT_INTERVAL)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        log.warning("console interval %r is not a number of seconds; using %s", raw, DEFAULT_INTERVAL)
        return DEFAULT_INTERVAL
    return max(MIN_INTERVAL, value)


def stderr_fd() -> int:
    """The file descriptor of this process's standard error."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2


class _Console:
    """One writer thread and one board per (run, output) in a process."""

    def __init__(self, run_id: str, fd: int, interval: float) -> None:
        self.board = Board(run_id)
        self.fd = fd
        self.interval = interval
        self.users = 0
        self.dropped = 0
        self._cond = threading.Condition()
        #: Finish summaries, written before any later view, each with the event set once written.
        self._pending: list[tuple[str, threading.Event]] = []
        self._written_version = 0
        self._last = 0.0
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="tracking-core-console", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def _write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            n = os.write(self.fd, data)  # may block: only this thread ever waits for the terminal
            data = data[n:]

    def _next(self) -> tuple[str, threading.Event | None] | None:
        """What to write now (``("", None)`` after a wait), or None to stop; called with the
        condition held."""
        if self._pending:
            return self._pending.pop(0)
        if self._stopping:
            return None
        if self.board.version == self._written_version:
            self._cond.wait()
            return "", None
        wait = self._last + self.interval - time.monotonic()
        if wait > 0:
            self._cond.wait(wait)
            return "", None
        self._written_version = self.board.version
        self._last = time.monotonic()
        return self.board.render(), None

    def _loop(self) -> None:
        while True:
            with self._cond:
                item = self._next()
            if item is None:
                return
            text, done = item
            if text:
                try:
                    self._write(text)
                except OSError:
                    self.dropped += 1  # stderr closed: nothing to show it on
            if done is not None:
                done.set()

    def say(self, text: str, bound: float) -> bool:
        """Hand ``text`` to the writer before any later view; wait at most ``bound`` seconds for
        it to be written. False (and counted as dropped) when the terminal did not take it."""
        done = threading.Event()
        with self._cond:
            self._pending.append((text, done))
            self._cond.notify()
        if done.wait(bound):
            return True
        self.dropped += 1
        return False

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()


def _console_for(run_id: str, fd: int, interval: float) -> _Console:
    with _boards_lock:
        console = _boards.get((run_id, fd))
        if console is None:
            console = _boards[(run_id, fd)] = _Console(run_id, fd, interval)
        console.users += 1
        return console


def _release(console: _Console) -> None:
    with _boards_lock:
        console.users -= 1
        if console.users <= 0:
            _boards.pop((console.board.run_id, console.fd), None)
            console.stop()
            if console.dropped:
                log.warning(
                    "console: %d view(s) of run %s not shown: the terminal (stderr) was closed "
                    "or did not take them in time; the trackers have every value",
                    console.dropped,
                    console.board.run_id,
                )


class ConsoleBackend:
    """The console view of one writer (the driver or a role) of the run."""

    def __init__(self, run: RunContext, fd: int | None = None) -> None:
        self.context = run
        self.interval = interval_of(run)
        self.fd = stderr_fd() if fd is None else fd
        self.name = run.role or "driver"
        self.console: _Console | None = None

    def _open(self, run: RunContext) -> dict[str, Any]:
        if self.console is None:
            self.console = _console_for(run.run_id, self.fd, self.interval)
            self.console.board.role(self.name)
        return {"interval": self.interval}

    @hookimpl
    def open_run(self, run: RunContext, target: Mapping[str, Any] | None) -> dict[str, Any]:
        return self._open(run)

    @hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> dict[str, Any]:
        return self._open(run)

    @hookimpl
    def log_config(self, config: ConfigSection, role: str | None) -> None:
        if self.console is not None:
            self.console.board.config(self.name, config.namespace, len(config.values))

    @hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        console = self.console
        if console is None or not records:
            return
        console.board.update(self.name, records)
        console.wake()

    # -- the rich kinds: a one-line note each -------------------------------------------------------
    def _note(self, text: str) -> None:
        console = self.console
        if console is not None:
            console.board.note(self.name, text)
            console.wake()

    @staticmethod
    def _at(step: int | None) -> str:
        return "" if step is None else f" at step {step}"

    @hookimpl
    def log_table(self, table: TableRecord) -> None:
        self._note(f"table {table.key} ({len(table.rows)} rows x {len(table.columns)} columns){self._at(table.step)}")

    @hookimpl
    def log_histogram(self, histogram: HistogramRecord) -> None:
        self._note(
            f"histogram {histogram.key} ({histogram.count} values, mean {fmt_value(histogram.mean)}, "
            f"min {fmt_value(histogram.min)}, max {fmt_value(histogram.max)}){self._at(histogram.step)}"
        )

    @hookimpl
    def log_text(self, text: TextRecord) -> None:
        self._note(f"text {text.key} ({len(text.text)} characters){self._at(text.step)}")

    @hookimpl
    def log_artifact(self, artifact: ArtifactRecord) -> None:
        what = f"{len(artifact.files)} files" if artifact.is_dir else "file"
        self._note(f"{artifact.kind} {artifact.name} ({what}, {artifact.size} bytes)")

    @hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        """Write this writer's finish summary, waiting at most :data:`WRITE_BOUND` seconds."""
        console, self.console = self.console, None
        if console is None:
            return
        text = console.board.summary(self.name, RunStatus(status).value, run.primary)
        try:
            if not console.say(text, WRITE_BOUND):
                log.debug("console: stderr did not take the finish summary within %.1fs", WRITE_BOUND)
        finally:
            _release(console)
