"""Route verl's own ``Tracking`` through tracking-core in every process of the job.

The mechanism is tracking-core's host import hook (:mod:`tracking_core.integrations.import_hook`,
the same as slime's adapter: an import hook in each process, inherited by child interpreters
through ``TRACKING_CORE_VERL=1`` and a ``sitecustomize`` first on ``PYTHONPATH``, Ray's
``worker_process_setup_hook`` for clusters that do not inherit the driver's environment), applied
to verl's tracking module, ``verl.utils.tracking``: as soon as it has run, the methods of its
``Tracking`` and ``ValidationGenerationsLogger`` classes are replaced
(:data:`verl_integration.tracking.REPLACEMENTS`). The classes themselves stay verl's, so every
``from verl.utils.tracking import Tracking``, made before or after, builds the routed one.

Call :func:`install` in the driver before ``ray.init`` (verl's ``main_ppo`` calls it in
``run_ppo``). ``python -m verl_integration.install`` prints the lines for a launch script.
:func:`uninstall` puts verl's methods back and removes the hook and the variables.
"""

from __future__ import annotations

import logging
import sys
import threading
import types
from collections.abc import Sequence

from tracking_core.host_api import BOOTSTRAP_DIR, HostHook, InstallModule

log = logging.getLogger("tracking_core.verl.install")

#: Set (to ``1``) in the environment of every process of the job that should route verl's tracking.
ENV_VAR = "TRACKING_CORE_VERL"
#: verl's tracking module.
TRACKING_MODULE = "verl.utils.tracking"
__all__ = ["BOOTSTRAP_DIR", "activate", "child_environment", "install", "ray_runtime_env", "requested", "uninstall"]

_lock = threading.RLock()


# -- patching ----------------------------------------------------------------------------------------
def patch_tracking_module(module: types.ModuleType) -> bool:
    """Replace the methods of verl's ``Tracking`` and ``ValidationGenerationsLogger`` in
    ``module``; returns whether anything changed (False when already patched)."""
    from . import tracking

    changed = False
    with _lock:
        for class_name, methods in tracking.REPLACEMENTS.items():
            cls = module.__dict__.get(class_name)
            if not isinstance(cls, type):
                log.warning("verl's %s has no class %s; it is not routed", module.__name__, class_name)
                continue
            originals = cls.__dict__.get(tracking.ORIGINALS_ATTR)
            if originals is None:
                originals = {}
                setattr(cls, tracking.ORIGINALS_ATTR, originals)
            for name, replacement in methods.items():
                if cls.__dict__.get(name) is replacement:
                    continue
                originals.setdefault(name, cls.__dict__.get(name))
                setattr(cls, name, replacement)
                changed = True
        supported = getattr(module.__dict__.get("Tracking"), "supported_backend", None)
        if isinstance(supported, list) and tracking.SELECT_NAME not in supported:
            supported.append(tracking.SELECT_NAME)
    if changed:
        log.debug("verl's tracking in %s now goes through tracking-core", module.__name__)
    return changed


def unpatch_tracking_module(module: types.ModuleType) -> None:
    """Put verl's own methods back in ``module``."""
    from . import tracking

    with _lock:
        for class_name in tracking.REPLACEMENTS:
            cls = module.__dict__.get(class_name)
            originals = cls.__dict__.get(tracking.ORIGINALS_ATTR) if isinstance(cls, type) else None
            if not originals:
                continue
            for name, original in originals.items():
                if original is None:
                    delattr(cls, name)
                else:
                    setattr(cls, name, original)
            delattr(cls, tracking.ORIGINALS_ATTR)
        supported = getattr(module.__dict__.get("Tracking"), "supported_backend", None)
        if isinstance(supported, list) and tracking.SELECT_NAME in supported:
            supported.remove(tracking.SELECT_NAME)


_hook = HostHook(
    host="verl",
    env_var=ENV_VAR,
    patchers={TRACKING_MODULE: patch_tracking_module},
    setup_hook="verl_integration.install.activate",
    log=log,
)
requested = _hook.requested
is_active = _hook.is_active
child_environment = _hook.child_environment
ray_runtime_env = _hook.ray_runtime_env


def activate() -> None:
    """Route verl's tracking in this process: install the import hook (idempotent) and patch
    ``verl.utils.tracking`` if it is already imported. Environment untouched; see :func:`install`.

    Also usable as Ray's ``worker_process_setup_hook``.
    """
    _hook.activate()


def install(*, children: bool = True) -> None:
    """Route verl's ``Tracking`` through tracking-core in this process and, with ``children``,
    in every process started from it afterwards (see the module docstring for how and where not).
    """
    activate()
    if children:
        _hook.export()
    log.info(
        "verl's Tracking goes through tracking-core (trainer.logger=['tracking_core'] or a backend "
        "name tracking-core knows) %s; %s",
        "now" if TRACKING_MODULE in sys.modules else f"when {TRACKING_MODULE} is imported",
        f"child processes follow ({ENV_VAR}=1, {BOOTSTRAP_DIR} first on PYTHONPATH)"
        if children
        else "this process only (children=False)",
    )


def uninstall() -> None:
    """Put verl's own methods back; remove the import hook and the environment variables."""
    with _lock:
        _hook.deactivate()
        module = sys.modules.get(TRACKING_MODULE)
        if module is not None:
            unpatch_tracking_module(module)
    _hook.unexport()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m verl_integration.install [--json]``: what to add to a verl launch."""
    return _hook.print_launch(
        argv,
        module="verl_integration.install",
        after=["# then: python -m verl.trainer.main_ppo ... trainer.logger='[console,tracking_core]'"],
    )


if __name__ == "__main__":
    sys.exit(main())
else:
    sys.modules[__name__].__class__ = InstallModule
