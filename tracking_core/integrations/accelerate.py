"""Accelerate adapter: tracking-core as one of Accelerate's trackers, by name or as an object.

>>> import tracking_core                                   # Accelerate >= 1.16: the name is known
>>> accelerator = Accelerator(log_with="tracking_core")
>>> accelerator.init_trackers("sft", config={"lr": 3e-4},  # starts the run, logs the config
...                           init_kwargs={"tracking_core": {"run_name": "sft-7b"}})
>>> accelerator.log({"train/loss": 0.42}, step=10)
>>> accelerator.end_training()                             # finishes the run

or, with any Accelerate version,
``Accelerator(log_with=[TrackingCoreTracker(run_name="sft-7b", project="sft")])``.

**When the name is registered.** Accelerate checks ``log_with`` names when the ``Accelerator``
is built, so the name must be known by then, whatever the order of the user's imports.
``import tracking_core`` calls :func:`register_by_name`: if ``accelerate.tracking`` is already
imported, the tracker is registered at once; otherwise an import hook
(:class:`tracking_core.integrations.import_hook.HostHook`) registers it the moment
``accelerate.tracking`` has been imported, before any ``Accelerator`` can exist. Importing
tracking-core therefore never imports accelerate. A process that never imports tracking-core
does not know the name (Accelerate has no plugin discovery for trackers).

Importing this module does not import accelerate either; the classes are defined (from
Accelerate's ``GeneralTracker``) when first looked up. See :mod:`._accelerate_tracker`.
"""

from __future__ import annotations

import logging
import sys
import types
from typing import TYPE_CHECKING, Any

from .import_hook import HostFinder, HostHook

if TYPE_CHECKING:
    from ._accelerate_tracker import NamedTrackingCoreTracker, TrackingCoreTracker

__all__ = ["NamedTrackingCoreTracker", "TrackingCoreTracker", "register_by_name"]

log = logging.getLogger("tracking_core.accelerate")

#: The module of Accelerate whose import registers the tracker name.
TRACKING_MODULE = "accelerate.tracking"


def _register(module: types.ModuleType) -> bool:
    from ._accelerate_tracker import register

    if register():
        return True
    log.debug("Accelerate %s has no register_tracker_class (1.16+): log_with='tracking_core' is unknown "
              "to it; pass TrackingCoreTracker(...) in log_with instead",
              getattr(sys.modules.get("accelerate"), "__version__", "?"))
    return False


class NameRegistrar(HostFinder):
    """Registers the tracker name when ``accelerate.tracking`` is imported; it replaces nothing
    of Accelerate's (unlike the finders of the slime and verl hooks, which patch their host)."""


class AccelerateNameHook(HostHook):
    finder_class = NameRegistrar


_hook: AccelerateNameHook | None = None


def register_by_name() -> None:
    """Make ``Accelerator(log_with="tracking_core")`` work in this process, now if Accelerate is
    imported, else as soon as it is; idempotent, never imports accelerate, never raises."""
    global _hook
    try:
        if _hook is None:
            _hook = AccelerateNameHook(
                host="Accelerate",
                env_var="",  # no variable: every import of tracking-core activates it
                patchers={TRACKING_MODULE: _register},
                setup_hook=f"{__name__}.register_by_name",
                log=log,
            )
        _hook.activate()
    except Exception:  # noqa: BLE001 - importing tracking-core must not fail over a host's name
        log.debug("could not register tracking-core's Accelerate tracker name", exc_info=True)


def __getattr__(name: str) -> Any:
    if name in ("TrackingCoreTracker", "NamedTrackingCoreTracker"):
        from . import _accelerate_tracker

        value = getattr(_accelerate_tracker, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
