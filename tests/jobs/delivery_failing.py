"""The ``failing`` backend of tests/core/test_delivery.py, installed as the module
``failing_plugin``: every log_metrics raises ConnectionError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tracking_core

if TYPE_CHECKING:
    from tracking_core.plugin_api import BackendRegistrar, MetricRecord, RunContext


class Failing:
    def __init__(self, run: RunContext) -> None:
        pass

    @tracking_core.hookimpl
    def open_run(self, run: RunContext) -> Mapping[str, Any]:
        return {}

    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        raise ConnectionError("tracker unreachable")


@tracking_core.hookimpl
def register_backends(register: BackendRegistrar) -> None:
    from tracking_core.plugin_api import Backend

    register(Backend("failing", Failing))
