"""Fakes for the delivery core's in-process tests: a tracker in memory, a plugin manager that
offers it as a backend, journal lines, a follower built from a plan, and a clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import tracking_core
from tracking_core.context import RunContext
from tracking_core.delivery import journal
from tracking_core.delivery.entries import Config, End, row_line
from tracking_core.delivery.follower import Follower
from tracking_core.delivery.plan import BackendPlan, Plan, context_to_dict
from tracking_core.plugins import PluginManager
from tracking_core.records import ConfigSection, MetricRecord, RunStatus
from tracking_core.registry import Backend

hookimpl = tracking_core.hookimpl


class FakeClock:
    """``monotonic`` and ``time`` that move only when told (``advance``) or waited on."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def __call__(self) -> float:
        return self.now


class FakeEvent(threading.Event):
    """An event whose ``wait`` moves ``clock`` on instead of sleeping."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        self.clock.advance(timeout or 0.0)
        return self.is_set()


class FakeTracker:
    """A tracker in memory. ``down``: every call raises ConnectionError; ``refuse``: metric
    names whose batches raise ValueError; ``refuse_config``: namespaces log_config refuses."""

    def __init__(self) -> None:
        self.metrics: list[tuple[str, float, int | None]] = []
        self.configs: list[str] = []
        self.closed: list[RunStatus] = []
        self.calls: list[str] = []
        self.batches: list[int] = []
        self.opened: list[Mapping[str, Any]] = []
        self.attached: list[Mapping[str, Any]] = []
        self.down = False
        self.refuse: set[str] = set()
        self.refuse_config: set[str] = set()
        self.failures_left = 0  # the next calls that fail, then it is up

    def _call(self, hook: str) -> None:
        self.calls.append(hook)
        if self.failures_left > 0:
            self.failures_left -= 1
            raise ConnectionError("tracker unreachable")
        if self.down:
            raise ConnectionError("tracker unreachable")

    @hookimpl
    def open_run(self, run: RunContext, target: Mapping[str, Any]) -> Mapping[str, Any]:
        self._call("open_run")
        self.opened.append(dict(target))
        return {"run": "r-1"}

    @hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> None:
        self._call("attach_run")
        self.attached.append(dict(attach))

    @hookimpl
    def log_metrics(self, records: Sequence[MetricRecord], run: RunContext) -> None:
        self._call("log_metrics")
        for record in records:
            if record.name in self.refuse:
                raise ValueError(f"refused {record.name}")
        self.batches.append(len(records))
        self.metrics.extend((r.name, r.value, r.step) for r in records)

    @hookimpl
    def log_config(self, config: ConfigSection, role: str | None, run: RunContext) -> None:
        self._call("log_config")
        if config.namespace in self.refuse_config:
            raise ValueError(f"refused {config.namespace}")
        self.configs.append(config.namespace)

    @hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        self._call("close_run")
        self.closed.append(status)

    def names(self) -> list[str]:
        return [name for name, _, _ in self.metrics]


class TextTracker(FakeTracker):
    """A tracker with ``log_text`` (the fallback of tables) and nothing else rich."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    @hookimpl
    def log_text(self, text: Any, run: RunContext) -> None:
        self._call("log_text")
        self.texts.append(text.key)


class RegistryTracker(FakeTracker):
    """A tracker that keeps the job's writer registry: ``writers`` is what read_writers says."""

    def __init__(self) -> None:
        super().__init__()
        self.published: list[dict[str, Any]] = []
        self.writers: dict[str, dict[str, Any]] | None = {}
        self.publish_fails = False

    @hookimpl
    def publish_writer(self, state: Mapping[str, Any], run: RunContext) -> None:
        if self.publish_fails:
            raise ConnectionError("registry unreachable")
        self.published.append(dict(state))

    @hookimpl
    def read_writers(self, run: RunContext) -> Mapping[str, Mapping[str, Any]] | None:
        return self.writers


def manager_with(trackers: Mapping[str, FakeTracker]) -> PluginManager:
    """A plugin manager (no entry points) offering each tracker as a backend of its name."""
    manager = PluginManager()

    class Offers:
        @hookimpl
        def register_backends(self, register: Any) -> None:
            for name, tracker in trackers.items():
                register(Backend(name, lambda run, tracker=tracker: tracker))

    manager.register(Offers(), "fake-trackers")
    return manager


def context(name: str = "fake", tracking_dir: Path | None = None, **changes: Any) -> RunContext:
    values: dict[str, Any] = {
        "backend": name,
        "run_id": "run-1",
        "name": "test",
        "primary": True,
        "tracking_dir": tracking_dir or Path("/nonexistent"),
        "pid": 4242,
    }
    values.update(changes)
    return RunContext(**values)


def plan_for(
    names: Sequence[str],
    folder: Path | None = None,
    *,
    action: str = "open",
    poll: float = 0.02,
    primary: bool = True,
    **changes: Any,
) -> Plan:
    backends = [BackendPlan(n, context_to_dict(context(n, primary=primary)), action, {"where": n}) for n in names]
    return Plan(folder=str(folder) if folder else None, prefix="", backends=backends, poll=poll, **changes)


def follower_for(trackers: Mapping[str, FakeTracker], folder: Path | None = None, **changes: Any) -> Follower:
    """A started follower delivering to ``trackers`` (a journal in ``folder``, else memory)."""
    return Follower(plan_for(list(trackers), folder, **changes), manager_with(trackers)).start()


def row(n: int, values: Mapping[str, float], step: int | None = None, ts: float = 1.0) -> dict[str, Any]:
    return row_line(n, ts, dict(values), step, None)


def end(n: int, status: str = "FINISHED", ts: float = 2.0) -> dict[str, Any]:
    return End(n, status, ts).encode()


def config(n: int, namespace: str = "launch") -> dict[str, Any]:
    return Config(n, ConfigSection(None, namespace, "", {"lr": 0.1}, {"lr": 0.1})).encode()


def rows(first: int, count: int, name: str = "loss") -> list[dict[str, Any]]:
    return [row(first + i, {name: float(first + i)}, step=first + i) for i in range(count)]


def journal_with(folder: Path, lines: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None = None) -> Path:
    """A journal in ``folder`` holding ``lines`` (its writer closed: whoever reads it may take
    the lock)."""
    writer = journal.JournalWriter(folder, dict(meta or {"backends": ["fake"]}), 1 << 20)
    writer.append("".join(journal.dumps(line) + "\n" for line in lines).encode())
    writer.close()
    return folder


def wait_for(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.005)
    return check()
