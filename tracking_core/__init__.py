"""tracking-core: tracker-agnostic experiment tracking for distributed training jobs.

One run per job in every selected tracker (W&B, MLflow, TensorBoard, jsonl, or any plugin),
one writer per role, every role's effective config namespaced, secrets never logged, and a
training loop that is never blocked or stopped by a tracker.

Importing this package imports only pluggy and the standard library.
"""

from __future__ import annotations

import pluggy

from .hookspecs import PROJECT

#: Mark hook implementations in plugins: ``@tracking_core.hookimpl``.
hookimpl = pluggy.HookimplMarker(PROJECT)

from typing import TYPE_CHECKING, Any  # noqa: E402

from .context import RunContext  # noqa: E402
from .errors import (  # noqa: E402
    BackendUnavailable,
    PluginLoadError,
    RunNotOpenYet,
    TrackingError,
    UnknownBackend,
)
from .handle import RUN_ENV, RunHandle  # noqa: E402
from .options import HostParser, add_tracking_options  # noqa: E402
from .plugins import get_plugin_manager  # noqa: E402
from .records import ConfigSection, MetricRecord, RunStatus  # noqa: E402

if TYPE_CHECKING:
    from .delivery.modes import DeliveryUnavailable
    from .runs import NullRun, Run, attach, start_run
    from .summary import FinishSummary

#: Imported on first use: a plugin module that only needs ``hookimpl`` stays cheap to import.
_LAZY = {
    "DeliveryUnavailable": ".delivery.modes",
    "NullRun": ".runs",
    "Run": ".runs",
    "attach": ".runs",
    "start_run": ".runs",
    "FinishSummary": ".summary",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tracking_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value

__version__ = "0.1.0"

# Accelerator(log_with="tracking_core") in every process that imports tracking-core (Accelerate
# >= 1.16): registered once accelerate.tracking is imported; accelerate is never imported here.
from .integrations.accelerate import register_by_name as _register_accelerate_name  # noqa: E402

_register_accelerate_name()

__all__ = [
    "RUN_ENV",
    "BackendUnavailable",
    "ConfigSection",
    "DeliveryUnavailable",
    "FinishSummary",
    "HostParser",
    "MetricRecord",
    "NullRun",
    "PluginLoadError",
    "Run",
    "RunContext",
    "RunHandle",
    "RunNotOpenYet",
    "RunStatus",
    "TrackingError",
    "UnknownBackend",
    "__version__",
    "add_tracking_options",
    "attach",
    "get_plugin_manager",
    "hookimpl",
    "start_run",
]
