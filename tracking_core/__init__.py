"""tracking-core: tracker-agnostic experiment tracking for distributed training jobs.

One run per job in every selected tracker (W&B, MLflow, TensorBoard, jsonl, or any plugin),
one writer per role, every role's effective config namespaced, secrets never logged, and a
training loop that is never blocked or stopped by a tracker.

Importing this package imports nothing but the few standard-library modules that keep
``Accelerator(log_with="tracking_core")`` working (see :mod:`.integrations.accelerate`): every
name below, pluggy's ``hookimpl`` included, is imported on first use, and so is any submodule
reached as an attribute (``tracking_core.settings``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not imported here: it costs the import a few ms
if TYPE_CHECKING:
    from typing import Any

    import pluggy

    from .context import RunContext
    from .delivery.modes import DeliveryUnavailable
    from .errors import (
        BackendUnavailable,
        PluginLoadError,
        RunNotOpenYet,
        TrackingError,
        UnknownBackend,
    )
    from .handle import RUN_ENV, RunHandle
    from .options import HostParser, add_tracking_options
    from .plugins import get_plugin_manager
    from .records import ConfigSection, MetricRecord, RunStatus
    from .reduce import Max, Mean, Min, Quantiles, Sum
    from .runs import NullRun, Run, attach, start_run
    from .summary import FinishSummary

    #: Mark hook implementations in plugins: ``@tracking_core.hookimpl``.
    hookimpl: pluggy.HookimplMarker

__version__ = "0.1.0"

#: Each public name and the module it comes from, imported on first use.
_LAZY = {
    "RunContext": ".context",
    "DeliveryUnavailable": ".delivery.modes",
    "BackendUnavailable": ".errors",
    "PluginLoadError": ".errors",
    "RunNotOpenYet": ".errors",
    "TrackingError": ".errors",
    "UnknownBackend": ".errors",
    "RUN_ENV": ".handle",
    "RunHandle": ".handle",
    "PROJECT": ".hookspecs",
    "HostParser": ".options",
    "add_tracking_options": ".options",
    "get_plugin_manager": ".plugins",
    "ConfigSection": ".records",
    "MetricRecord": ".records",
    "RunStatus": ".records",
    "NullRun": ".runs",
    "Run": ".runs",
    "attach": ".runs",
    "start_run": ".runs",
    "FinishSummary": ".summary",
    "Mean": ".reduce",
    "Sum": ".reduce",
    "Max": ".reduce",
    "Min": ".reduce",
    "Quantiles": ".reduce",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name == "hookimpl":
        import pluggy

        from .hookspecs import PROJECT

        value = pluggy.HookimplMarker(PROJECT)
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    elif name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:  # a submodule reached as an attribute, as it was when this package imported it
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
    "Max",
    "Mean",
    "MetricRecord",
    "Min",
    "NullRun",
    "PluginLoadError",
    "Quantiles",
    "Run",
    "RunContext",
    "RunHandle",
    "RunNotOpenYet",
    "RunStatus",
    "Sum",
    "TrackingError",
    "UnknownBackend",
    "__version__",
    "add_tracking_options",
    "attach",
    "get_plugin_manager",
    "hookimpl",
    "start_run",
]
