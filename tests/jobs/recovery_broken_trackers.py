"""Trackers that break their process (tests/faults/test_recovery.py writes this module into a
site directory as the distribution ``broken-trackers``, module ``broken_trackers``): ``hang``
never returns from log_metrics, ``crashy`` aborts its process once it has taken
``CRASHY_AFTER`` values (counted in ``CRASHY_COUNT``, a file, across processes)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tracking_core
from tracking_core.plugin_api import MetricRecord, RunContext, RunStatus


class Hang:
    def __init__(self, run: RunContext) -> None:
        self.run = run

    @tracking_core.hookimpl
    def open_run(self, run: RunContext) -> dict[str, Any]:
        return {"hang": run.run_id}

    @tracking_core.hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> None:
        return None

    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        threading.Event().wait()  # a client stuck on a socket that never answers

    @tracking_core.hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        return None


class Crashy(Hang):
    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        path = os.environ["CRASHY_COUNT"]
        taken = os.path.getsize(path) if os.path.exists(path) else 0
        if taken + len(records) > int(os.environ.get("CRASHY_AFTER", "0")):
            os.abort()  # what a segfault or abort() in a C extension does
        with open(path, "ab") as fh:
            fh.write(b"." * len(records))


@tracking_core.hookimpl
def register_backends(register: Callable[[Any], None]) -> None:
    from tracking_core.plugin_api import Backend

    register(Backend("hang", Hang))
    from tracking_core.plugin_api import Backend

    register(Backend("crashy", Crashy))
