"""The ``gated`` backend of tests/core/test_journal_sync.py, installed as the module
``gated_plugin``: a real backend whose tracker is the file $GATED_OUT; it is "down" while the
file $GATED_DOWN exists (a call that meets the outage creates $GATED_DOWN.seen).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tracking_core

if TYPE_CHECKING:
    from tracking_core.plugin_api import (
        BackendRegistrar,
        ConfigSection,
        MetricRecord,
        RunContext,
        RunStatus,
    )


class Gated:
    def __init__(self, run: RunContext) -> None:
        self.out = os.environ["GATED_OUT"]
        self.down = os.environ["GATED_DOWN"]

    def _check(self) -> None:
        if os.path.exists(self.down):
            open(self.down + ".seen", "w").close()  # a call met the outage
            raise ConnectionError("gated tracker is down")

    @tracking_core.hookimpl
    def open_run(self, run: RunContext) -> Mapping[str, Any]:
        self._check()
        return {"opened": run.run_id}

    @tracking_core.hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> None:
        self._check()

    @tracking_core.hookimpl
    def log_config(self, config: ConfigSection, role: str | None) -> None:
        self._check()
        with open(self.out, "a") as fh:
            fh.write(json.dumps({"config": config.namespace}) + "\n")

    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        self._check()
        with open(self.out, "a") as fh:
            fh.write("".join(json.dumps({"name": r.name, "step": r.step, "value": r.value}) + "\n" for r in records))

    @tracking_core.hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        self._check()
        if run.primary:
            with open(self.out, "a") as fh:
                fh.write(json.dumps({"status": status.value}) + "\n")


@tracking_core.hookimpl
def register_backends(register: BackendRegistrar) -> None:
    from tracking_core.plugin_api import Backend

    register(Backend("gated", Gated))
