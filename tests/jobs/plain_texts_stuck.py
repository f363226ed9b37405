"""The ``stuck`` backend of tests/core/test_plain_texts.py, installed as the module
``stuck_plugin``: its constructor aborts its process ($STUCK=abort) or never returns
($STUCK=hang).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tracking_core

if TYPE_CHECKING:
    from tracking_core.plugin_api import BackendRegistrar, MetricRecord, RunContext


class Stuck:
    def __init__(self, run: RunContext) -> None:
        if os.environ.get("STUCK") == "abort":
            os.abort()
        if os.environ.get("STUCK") == "hang":
            time.sleep(3600)

    @tracking_core.hookimpl
    def open_run(self, run: RunContext) -> Mapping[str, Any]:
        return {}

    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        pass


@tracking_core.hookimpl
def register_backends(register: BackendRegistrar) -> None:
    from tracking_core.plugin_api import Backend

    register(Backend("stuck", Stuck))
