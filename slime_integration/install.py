"""Put the drop-ins in place of slime's tracking functions in every process of the job.

The mechanism is tracking-core's host import hook (:mod:`tracking_core.integrations.import_hook`:
an import hook in each process, inherited by child interpreters through ``TRACKING_CORE_SLIME=1``
and a ``sitecustomize`` first on ``PYTHONPATH``, Ray's ``worker_process_setup_hook`` for clusters
that do not inherit the driver's environment), applied to slime's modules:

* slime's tracking module (:data:`TRACKING_MODULES`): ``init_tracking``, ``log`` and
  ``finish_tracking`` are replaced as soon as it has run, *before* any other module can import
  them, so every ``from ... import init_tracking`` made afterwards binds ours; a module that bound
  one of slime's originals earlier is rebound too;
* slime's argument module (:data:`ARGUMENTS_MODULE`): its parser gets the tracking options;
* slime's rollout logging (:data:`ROLLOUT_METRICS_MODULE`): followed by the samples tables.

``python -m slime_integration.install`` prints the lines to add to a launch script. The limits
are those of the import hook (``-E``/``-I``/``-S`` interpreters, an environment rebuilt without
``PYTHONPATH``, the package at the same path on every node unless Ray's setup hook is used).
:func:`uninstall` puts slime's functions back and removes the hook and the variables.
"""

from __future__ import annotations

import logging
import sys
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracking_core.host_api import BOOTSTRAP_DIR, HostHook, InstallModule

log = logging.getLogger("tracking_core.slime.install")

#: Set (to ``1``) in the environment of every process of the job that should use the drop-ins.
ENV_VAR = "TRACKING_CORE_SLIME"
#: slime's tracking module: ``slime.observability`` since THUDM/slime@624b824a, ``slime.utils`` before.
TRACKING_MODULES: tuple[str, ...] = (
    "slime.observability.logging_utils",
    "slime.utils.logging_utils",
)
#: slime's argument module: its parser gets the tracking options.
ARGUMENTS_MODULE = "slime.utils.arguments"
#: The functions replaced in slime's tracking module.
DROP_INS: tuple[str, ...] = ("init_tracking", "log", "finish_tracking")
#: Set on a patched module: the functions it had before.
ORIGINALS_ATTR = "__tracking_core_originals__"
__all__ = ["BOOTSTRAP_DIR", "activate", "child_environment", "install", "ray_runtime_env", "requested", "uninstall"]

_lock = threading.RLock()


# -- patching ----------------------------------------------------------------------------------------
def _drop_ins() -> dict[str, Callable[..., Any]]:
    from . import tracking

    return {name: getattr(tracking, name) for name in DROP_INS}


def _rebind_everywhere(replacements: Mapping[int, Callable[..., Any]], names: Sequence[str]) -> None:
    """Rebind module-level names still bound to a replaced function (``from ... import log``),
    except in this package's own modules (the drop-ins' home)."""
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        if str(namespace.get("__name__", "")).partition(".")[0] == __package__:
            continue
        for name in names:
            value = namespace.get(name)
            if value is not None and id(value) in replacements:
                _set(namespace, name, replacements[id(value)])


#: Every binding this module changed: (namespace, name, value before, value set).
_changes: list[tuple[dict[str, Any], str, Any, Any]] = []


def _set(namespace: dict[str, Any], name: str, value: Any) -> None:
    _changes.append((namespace, name, namespace.get(name), value))
    namespace[name] = value


def patch_tracking_module(module: types.ModuleType) -> bool:
    """Replace slime's ``init_tracking``, ``log`` and ``finish_tracking`` in ``module`` with the
    drop-ins (and wherever else a module bound them); returns whether anything changed."""
    ours = _drop_ins()
    with _lock:
        originals = module.__dict__.setdefault(ORIGINALS_ATTR, {})
        replacements: dict[int, Callable[..., Any]] = {}
        for name, function in ours.items():
            current = module.__dict__.get(name)
            if current is function:
                continue
            if current is not None:
                originals.setdefault(name, current)
                replacements[id(current)] = function
            _set(module.__dict__, name, function)
        if replacements:
            _rebind_everywhere(replacements, DROP_INS)
    if replacements:
        log.debug("slime tracking in %s now goes through tracking-core", module.__name__)
    return bool(replacements)


def patch_arguments_module(module: types.ModuleType) -> bool:
    """Make slime's ``parse_args`` add the tracking options (after slime's own, so a flag slime
    defines is reused, never defined twice)."""
    original = module.__dict__.get("get_slime_extra_args_provider")
    if original is None or getattr(original, "__tracking_core__", False):
        return False

    def get_slime_extra_args_provider(add_custom_arguments: Any = None) -> Any:
        provider = original(add_custom_arguments)

        def add_slime_arguments(parser: Any) -> Any:
            parser = provider(parser)
            from .options import add_tracking_arguments

            return add_tracking_arguments(parser)

        return add_slime_arguments

    get_slime_extra_args_provider.__tracking_core__ = True  # type: ignore[attr-defined]
    get_slime_extra_args_provider.__wrapped__ = original  # type: ignore[attr-defined]
    get_slime_extra_args_provider.__doc__ = original.__doc__
    with _lock:
        module.__dict__.setdefault(ORIGINALS_ATTR, {})["get_slime_extra_args_provider"] = original
        _set(module.__dict__, "get_slime_extra_args_provider", get_slime_extra_args_provider)
    return True


#: slime's rollout logging: its two functions are followed by the samples tables
#: (``--tracking-log-samples``, see :mod:`slime_integration.samples`).
ROLLOUT_METRICS_MODULE = "slime.observability.rollout_metrics"
ROLLOUT_LOGGERS = {"log_rollout_data": "log_rollout_samples", "log_eval_rollout_data": "log_eval_rollout_samples"}


def patch_rollout_metrics_module(module: types.ModuleType) -> bool:
    """Follow slime's ``log_rollout_data`` / ``log_eval_rollout_data`` with the samples tables
    (slime's function runs first, the user's custom log function within it, as always)."""
    from . import samples

    with _lock:
        originals = module.__dict__.setdefault(ORIGINALS_ATTR, {})
        replacements: dict[int, Callable[..., Any]] = {}
        for name, ours in ROLLOUT_LOGGERS.items():
            current = module.__dict__.get(name)
            if current is None or getattr(current, "__tracking_core__", False):
                continue
            wrapped = samples.wrap(current, getattr(samples, ours))
            originals.setdefault(name, current)
            replacements[id(current)] = wrapped
            _set(module.__dict__, name, wrapped)
        if replacements:
            _rebind_everywhere(replacements, tuple(ROLLOUT_LOGGERS))
    return bool(replacements)


_PATCHERS: dict[str, Callable[[types.ModuleType], bool]] = {
    **{name: patch_tracking_module for name in TRACKING_MODULES},
    ARGUMENTS_MODULE: patch_arguments_module,
    ROLLOUT_METRICS_MODULE: patch_rollout_metrics_module,
}


_hook = HostHook(
    host="slime", env_var=ENV_VAR, patchers=_PATCHERS, setup_hook="slime_integration.install.activate", log=log
)
requested = _hook.requested
is_active = _hook.is_active
child_environment = _hook.child_environment
ray_runtime_env = _hook.ray_runtime_env


def activate() -> None:
    """Use the drop-ins in this process: install the import hook (idempotent) and patch slime's
    modules that are already imported. Environment untouched; see :func:`install`.

    Also usable as Ray's ``worker_process_setup_hook``.
    """
    _hook.activate()


def install(*, children: bool = True) -> None:
    """Use tracking-core in place of slime's tracking in this process and, with ``children``,
    in every process started from it afterwards (see the module docstring for how and where not).

    Call it in the driver before slime creates its Ray actors (best: before ``ray.init`` and
    before importing slime, though modules imported earlier are patched too).
    """
    activate()
    if children:
        _hook.export()
    patched = [name for name in TRACKING_MODULES if name in sys.modules]
    log.info(
        "slime tracking goes through tracking-core: %s of %s %s; tracking options added to %s; "
        "%s of %s followed by the samples logger (--tracking-log-samples); %s",
        "/".join(DROP_INS),
        " or ".join(TRACKING_MODULES),
        f"replaced now in {', '.join(patched)}" if patched else "replaced when slime imports it",
        ARGUMENTS_MODULE,
        "/".join(ROLLOUT_LOGGERS),
        ROLLOUT_METRICS_MODULE,
        f"child processes follow ({ENV_VAR}=1, {BOOTSTRAP_DIR} first on PYTHONPATH)"
        if children
        else "this process only (children=False)",
    )


def uninstall() -> None:
    """Put slime's own functions back: where :func:`install` replaced them, and in every module
    that imported a drop-in under slime's names while the hook was active (modules of this
    package excepted); remove the import hook and the environment variables."""
    with _lock:
        _hook.deactivate()
        while _changes:
            namespace, name, before, after = _changes.pop()
            if namespace.get(name) is after:
                if before is None:
                    namespace.pop(name, None)
                else:
                    namespace[name] = before
        ours = _drop_ins()
        for name in _PATCHERS:
            module = sys.modules.get(name)
            if module is None:
                continue
            originals = module.__dict__.pop(ORIGINALS_ATTR, None) or {}
            _rebind_everywhere(
                {id(ours[attr]): fn for attr, fn in originals.items() if attr in ours}, DROP_INS
            )
        _changes.clear()
    _hook.unexport()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m slime_integration.install [--json]``: what to add to a slime launch."""
    return _hook.print_launch(argv, module="slime_integration.install")


if __name__ == "__main__":
    sys.exit(main())
else:
    sys.modules[__name__].__class__ = InstallModule
