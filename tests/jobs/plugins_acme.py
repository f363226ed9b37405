"""The ``acme`` backend and collector of tests/core/test_plugins.py, installed as the module
``acme_plugin`` of the distribution acme-tracking: it writes each call it gets as a JSON line to
the file $ACME_LOG.
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

LOG = os.environ["ACME_LOG"]


def _write(event: str, **data: Any) -> None:
    with open(LOG, "a") as fh:
        fh.write(json.dumps({"event": event, **data}, default=str) + "\n")


class AcmeBackend:
    def __init__(self, run: RunContext) -> None:
        self.run = run

    @tracking_core.hookimpl
    def open_run(self, run: RunContext) -> Mapping[str, Any]:
        _write("open", run_id=run.run_id)
        return {"where": "acme://" + run.run_id}

    @tracking_core.hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> None:
        _write("attach", role=run.role, attach=dict(attach))

    @tracking_core.hookimpl
    def log_config(self, config: ConfigSection, role: str | None) -> None:
        _write("config", role=role, params=dict(config.params))

    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        _write("metrics", names=[r.name for r in records], steps=[r.step for r in records],
               axes=[r.axis for r in records], values=[r.value for r in records])

    @tracking_core.hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        _write("close", status=status.value, primary=run.primary)


@tracking_core.hookimpl
def register_backends(register: BackendRegistrar) -> None:
    from tracking_core.plugin_api import Backend

    register(Backend("acme", AcmeBackend, description="test backend"))


@tracking_core.hookimpl
def collect_config(role: str) -> Mapping[str, Any]:
    return {"acme_seed": 7, "acme_role": role}
