"""The ``probe`` backend of tests/core/test_delivery_process.py, installed by the ``probe``
fixture as the module ``probe_plugin`` of a real distribution: it records where each call ran
into the file $PROBE_OUT. With $PROBE_FAIL_ONCE its first log_metrics raises; while the file
$PROBE_HOLD exists, its first log_metrics removes it, says so and sleeps (with $PROBE_FATAL, a
thread of its own meanwhile ends the process with a fatal error).
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tracking_core

if TYPE_CHECKING:
    from tracking_core.plugin_api import BackendRegistrar, MetricRecord, RunContext, RunStatus


def _fatal() -> None:
    time.sleep(0.5)
    ctypes.pythonapi.Py_FatalError(b"probe: a fatal error outside any call")


def _write(obj: dict[str, Any]) -> None:
    with open(os.environ["PROBE_OUT"], "a") as fh:
        fh.write(json.dumps(obj) + "\n")


class Probe:
    def __init__(self, run: RunContext) -> None:
        self.failed = False

    @tracking_core.hookimpl
    def open_run(self, run: RunContext) -> Mapping[str, Any]:
        _write({"open": os.getpid(), "training": run.pid})
        return {"probe": True}

    @tracking_core.hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> None:
        _write({"attach": os.getpid(), "training": run.pid, "role": run.role})

    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        hold = os.environ.get("PROBE_HOLD")
        if hold and os.path.exists(hold):
            os.remove(hold)
            _write({"holding": os.getpid(), "thread": threading.get_ident()})
            if os.environ.get("PROBE_FATAL"):
                threading.Thread(target=_fatal, daemon=True).start()
            time.sleep(60)
        if os.environ.get("PROBE_FAIL_ONCE") and not self.failed:
            self.failed = True
            raise ConnectionResetError("probe tracker hiccup")
        for r in records:
            _write({"name": r.name, "step": r.step, "pid": os.getpid()})

    @tracking_core.hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        _write({"close": status.value, "pid": os.getpid()})


@tracking_core.hookimpl
def register_backends(register: BackendRegistrar) -> None:
    from tracking_core.plugin_api import Backend

    register(Backend("probe", Probe))
