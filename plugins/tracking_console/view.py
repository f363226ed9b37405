"""What the console shows: the latest metrics per role, the run's progress, the finish summary.

Pure formatting, no I/O: :class:`Board` keeps the state (updated by the backend's worker thread,
cheaply) and renders lines on demand (from the console's writer thread).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from tracking_core.plugin_api import MetricRecord

#: How many metrics of a role one line shows (the most recently logged first); the rest counted.
SHOWN = 6
PREFIX = "[tracking-core]"


def run_started(run_id: str, now: float | None = None) -> float:
    """When the run started: the time in a tracking-core run id (``20261201-181158-dd423e``,
    local time) when it has one and it is not in the future, else now."""
    now = time.time() if now is None else now
    try:
        started = time.mktime(time.strptime(run_id[:15], "%Y%m%d-%H%M%S"))
    except (ValueError, OverflowError):
        return now
    return started if started <= now else now


def fmt_value(value: float) -> str:
    """A metric value in a few characters (``0.1235``, ``1.2e-06``, ``1200``, ``nan``)."""
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def fmt_duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{sec:02d}s" if hours else f"{minutes}m{sec:02d}s"


@dataclass
class RoleView:
    """One role's (or the driver's) latest values and counters."""

    name: str
    prefix: str = ""
    values: dict[str, float] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)
    count: int = 0
    configs: list[str] = field(default_factory=list)
    #: The latest rich record (table, histogram, text, artifact), as a short note.
    note: str | None = None
    notes: int = 0

    def update(self, records: Sequence[MetricRecord]) -> None:
        for r in records:
            key = r.key
            self.values.pop(key, None)  # re-inserted last: the most recent shows first
            self.values[key] = r.value
            if r.step is not None:
                axis = r.step_key or "step"
                self.steps[axis] = int(r.step)
        self.count += len(records)

    def line(self) -> str:
        parts = [self.name]
        if self.steps:
            parts.append(" ".join(f"{axis}={step}" for axis, step in self.steps.items()))
        recent = list(self.values.items())[::-1][:SHOWN]
        if recent:
            shown = " ".join(f"{k}={fmt_value(v)}" for k, v in recent)
            more = len(self.values) - len(recent)
            parts.append(shown + (f" (+{more} more)" if more > 0 else ""))
        parts.append(f"{self.count} values")
        if self.note:
            parts.append(f"latest of {self.notes} other records: {self.note}")
        return " | ".join(parts)


class Board:
    """The state of one run as seen by the writers of one process (roles attached in one process
    share a board, so their lines come together)."""

    def __init__(self, run_id: str, started: float | None = None) -> None:
        self.run_id = run_id
        #: Wall-clock start of the run (from its id when it carries one), so every writer's
        #: elapsed time counts from the same moment.
        self.started = run_started(run_id) if started is None else started
        self.roles: dict[str, RoleView] = {}
        self.lock = threading.Lock()
        #: Bumped by every change; the writer renders when it differs from what it last wrote.
        self.version = 0

    def role(self, name: str, prefix: str = "") -> RoleView:
        with self.lock:
            view = self.roles.get(name)
            if view is None:
                view = self.roles[name] = RoleView(name, prefix)
                self.version += 1
            return view

    def update(self, name: str, records: Sequence[MetricRecord]) -> None:
        with self.lock:
            view = self.roles.get(name)
            if view is None:
                prefix = records[0].prefix if records else ""
                view = self.roles[name] = RoleView(name, prefix)
            view.update(records)
            self.version += 1

    def note(self, name: str, note: str) -> None:
        """Record a one-line note about a table, histogram, text or artifact of ``name``."""
        with self.lock:
            view = self.roles.setdefault(name, RoleView(name))
            view.note = note
            view.notes += 1
            self.version += 1

    def config(self, name: str, namespace: str, keys: int) -> None:
        with self.lock:
            view = self.roles.setdefault(name, RoleView(name))
            view.configs.append(f"{namespace}({keys})")
            self.version += 1

    def render(self, now: float | None = None) -> str:
        """The progress view: one line per role with what it logged so far."""
        elapsed = (time.time() if now is None else now) - self.started
        with self.lock:
            lines = [
                f"{PREFIX} {self.run_id} {fmt_duration(elapsed)}: {v.line()}"
                for v in self.roles.values()
                if v.count or v.notes
            ]
        return "\n".join(lines) + "\n" if lines else ""

    def summary(self, name: str, status: str, primary: bool, now: float | None = None) -> str:
        """The finish line of one writer: the run's status (primary) or the role's detach."""
        elapsed = (time.time() if now is None else now) - self.started
        with self.lock:
            view = self.roles.get(name) or RoleView(name)
            configs = ", ".join(view.configs) or "none"
            head = f"run {self.run_id} {status}" if primary else f"{name} of run {self.run_id} detached"
            lines = [f"{PREFIX} {head} after {fmt_duration(elapsed)}; configs: {configs}"]
            if view.count or view.notes:
                lines.append(f"{PREFIX}   last: {view.line()}")
        return "\n".join(lines) + "\n"
