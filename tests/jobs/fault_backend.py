"""A fault-injection backend for tracking-core's fault suite (see tests/faults/conftest.py).

``make_dist`` of the fault suite's ``fault_site`` fixture writes this file into a site directory, as ``faulty_tracking``,
the module of the installed distribution ``faulty-tracking`` (entry point ``faulty``): every process of a
job loads it through the ``tracking_core`` entry-point group. Its switches are the ``FAULT_*``
environment variables that tests/faults/conftest.py describes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tracking_core
from tracking_core.plugin_api import (
    ArtifactRecord,
    ConfigSection,
    HistogramRecord,
    MetricRecord,
    RunContext,
    RunStatus,
    TableRecord,
    TextRecord,
)


def _line(obj: Any) -> str:
    return json.dumps(obj, default=lambda o: f"<{type(o).__name__}>") + "\n"


def emit(*objs: Mapping[str, Any]) -> None:
    path = os.environ.get("FAULT_OUT")
    if not path or not objs:
        return
    pid = os.getpid()
    data = "".join(_line({**o, "pid": pid}) for o in objs).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _value(v: Any) -> Any:
    return v if isinstance(v, (int, float, str, type(None))) else repr(v)


class Faulty:
    name = "faulty"
    faults = True

    def __init__(self, run: RunContext) -> None:
        self.context = run

    def _gate(self, hook: str) -> None:
        if not self.faults:
            return
        if hook in ("open_run", "attach_run"):
            time.sleep(float(os.environ.get("FAULT_SLOW_CONNECT") or 0))
        down = os.environ.get("FAULT_DOWN_FILE")
        if down and os.path.exists(down):
            emit({"ev": "refused", "b": self.name, "hook": hook, "why": "down"})
            raise ConnectionError(f"{self.name} tracker unreachable (FAULT_DOWN_FILE exists)")

    @tracking_core.hookimpl
    def open_run(self, run: RunContext) -> dict[str, Any]:
        self._gate("open_run")
        emit({"ev": "open", "b": self.name, "run_id": run.run_id, "primary": run.primary,
              "role": run.role, "training": run.pid})
        return {"opened": run.run_id}

    @tracking_core.hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> None:
        self._gate("attach_run")
        emit({"ev": "attach", "b": self.name, "run_id": run.run_id, "primary": run.primary,
              "role": run.role, "training": run.pid})

    @tracking_core.hookimpl
    def log_config(self, config: ConfigSection, role: str | None) -> None:
        self._gate("log_config")
        if self.faults and os.environ.get("FAULT_FAIL_CONFIG") == config.namespace:
            emit({"ev": "refused", "b": self.name, "hook": "log_config",
                  "namespace": config.namespace, "why": "FAULT_FAIL_CONFIG"})
            raise RuntimeError(f"config {config.namespace!r} refused (FAULT_FAIL_CONFIG)")
        try:
            params = json.loads(_line(dict(config.params)))
        except Exception as exc:  # the params must be plain data; say so if they are not
            params = {"<unserialisable>": repr(exc)}
        emit({"ev": "config", "b": self.name, "namespace": config.namespace, "role": role,
              "params": params})

    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        self._gate("log_metrics")
        if self.faults:
            slow = float(os.environ.get("FAULT_SLOW") or 0)
            if slow:
                time.sleep(slow)
            reject = os.environ.get("FAULT_REJECT_KEY")
            if reject is not None and any(r.name == reject or r.key == reject for r in records):
                emit({"ev": "refused", "b": self.name, "hook": "log_metrics", "why": "key",
                      "key": reject})
                raise ValueError("invalid metric key in this batch (FAULT_REJECT_KEY)")
        if os.environ.get("FAULT_COUNT_ONLY") == "1":
            emit({"ev": "batch", "b": self.name, "n": len(records)})
            return
        emit(*({"ev": "metric", "b": self.name, "name": r.name, "key": _value(r.key),
                "step": r.step, "value": _value(r.value),
                "ts": getattr(r, "timestamp", None)} for r in records))

    def _rich(self, hook: str, record: Any, **fields: Any) -> None:
        self._gate(hook)
        if self.faults and os.environ.get("FAULT_REJECT_KEY") == record.key:
            emit({"ev": "refused", "b": self.name, "hook": hook, "why": "key", "key": record.key})
            raise ValueError(f"invalid {hook} key (FAULT_REJECT_KEY)")
        emit({"ev": hook[4:], "b": self.name, "name": record.name, "key": record.key,
              "step": getattr(record, "step", None), "ts": record.timestamp, **fields})

    @tracking_core.hookimpl
    def log_table(self, table: TableRecord) -> None:
        self._rich("log_table", table, columns=list(table.columns), rows=[list(r) for r in table.rows])

    @tracking_core.hookimpl
    def log_histogram(self, histogram: HistogramRecord) -> None:
        self._rich("log_histogram", histogram, counts=list(histogram.counts), count=histogram.count)

    @tracking_core.hookimpl
    def log_text(self, text: TextRecord) -> None:
        self._rich("log_text", text, text=text.text)

    @tracking_core.hookimpl
    def log_artifact(self, artifact: ArtifactRecord) -> None:
        self._rich("log_artifact", artifact, sha256=artifact.sha256(), size=artifact.size,
                   snapshot=artifact.snapshot, kind=artifact.kind)

    @tracking_core.hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        self._gate("close_run")
        if self.faults and os.environ.get("FAULT_FAIL_CLOSE") == "1":
            emit({"ev": "refused", "b": self.name, "hook": "close_run", "why": "FAULT_FAIL_CLOSE"})
            raise RuntimeError("close refused (FAULT_FAIL_CLOSE)")
        emit({"ev": "close", "b": self.name, "status": getattr(status, "value", str(status)),
              "primary": run.primary, "role": run.role})


class Steady(Faulty):
    """The same lines, never a failure."""

    name = "steady"
    faults = False


@tracking_core.hookimpl
def register_backends(register: Callable[[Any], None]) -> None:
    batch = os.environ.get("FAULT_MAX_BATCH")
    for name, cls in (("faulty", Faulty), ("steady", Steady)):
        if batch:
            try:
                from tracking_core.plugin_api import Backend

                register(Backend(name, cls, max_batch=int(batch)))
                continue
            except TypeError:
                pass
        from tracking_core.plugin_api import Backend

        register(Backend(name, cls))
