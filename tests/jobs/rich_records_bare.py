"""Two backends without the rich hooks (tests/faults/test_rich_records.py: the fallbacks test
writes this module into a site directory as the distribution ``bare-tracking``, module
``bare_tracking``): ``texty`` has only ``log_metrics`` and ``log_text``, ``scalars`` only
``log_metrics``. Each call appends a JSON line to ``$BARE_OUT``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tracking_core
from tracking_core.plugin_api import MetricRecord, RunContext, TextRecord


def emit(obj: Mapping[str, Any]) -> None:
    with open(os.environ["BARE_OUT"], "a") as fh:
        fh.write(json.dumps(obj) + "\n")


class Texty:
    def __init__(self, run: RunContext) -> None:
        pass

    @tracking_core.hookimpl
    def open_run(self, run: RunContext) -> dict[str, Any]:
        return {}

    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        for r in records:
            emit({"b": "texty", "ev": "metric", "name": r.name, "step": r.step, "value": r.value})

    @tracking_core.hookimpl
    def log_text(self, text: TextRecord) -> None:
        emit({"b": "texty", "ev": "text", "name": text.name, "step": text.step, "text": text.text})


class Scalars:
    def __init__(self, run: RunContext) -> None:
        pass

    @tracking_core.hookimpl
    def open_run(self, run: RunContext) -> dict[str, Any]:
        return {}

    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        for r in records:
            emit({"b": "scalars", "ev": "metric", "name": r.name, "step": r.step, "value": r.value})


@tracking_core.hookimpl
def register_backends(register: Callable[[Any], None]) -> None:
    from tracking_core.plugin_api import Backend

    register(Backend("texty", Texty))
    from tracking_core.plugin_api import Backend

    register(Backend("scalars", Scalars))
