"""Delivery on threads when asked, and the errors of delivery= values that cannot be had
(tests/core/test_delivery_process.py, test_thread_delivery_on_request_and_clear_errors): prints
this process's pid, the error of a process delivery for a backend registered at run time, the
delivery chosen for it by default, and the error of an unknown delivery.

Usage: python delivery_process_thread.py TRACKING_DIR
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import tracking_core

if TYPE_CHECKING:
    from tracking_core.plugin_api import BackendRegistrar, MetricRecord, RunContext

tracking_dir = sys.argv[1]
run = tracking_core.start_run(backends=["probe"], tracking_dir=tracking_dir, delivery="thread")
run.log_metrics({"x": 1.0}, step=0)
run.finish()
print(os.getpid())


class Inline:
    def __init__(self, run: RunContext) -> None:
        pass

    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        pass


class Registers:
    @tracking_core.hookimpl
    def register_backends(self, register: BackendRegistrar) -> None:
        from tracking_core.plugin_api import Backend

        register(Backend("inline", Inline))


tracking_core.get_plugin_manager().register(Registers(), "inline-plugin")
try:
    tracking_core.start_run(backends=["inline"], tracking_dir=tracking_dir, delivery="process")
except tracking_core.DeliveryUnavailable as exc:
    print("ERROR", exc)
auto = tracking_core.start_run(backends=["inline"], tracking_dir=tracking_dir)
print("AUTO", type(auto._delivery).__name__)
auto.finish()
try:
    tracking_core.start_run(backends=["probe"], tracking_dir=tracking_dir, delivery="fork")
except ValueError as exc:
    print("ERROR", exc)
