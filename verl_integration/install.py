"""Route verl's own ``Tracking`` through tracking-core in every process of the job.

The mechanism and its guarantees are slime's (:mod:`slime_integration.install`), applied to
verl's tracking module, ``verl.utils.tracking``:

1. **An import hook.** :func:`activate` puts a finder at the front of ``sys.meta_path``; when
   ``verl.utils.tracking`` is imported, the normal loader runs it and then the methods of its
   ``Tracking`` and ``ValidationGenerationsLogger`` classes are replaced
   (:data:`verl_integration.tracking.REPLACEMENTS`). The classes themselves stay verl's, so every
   ``from verl.utils.tracking import Tracking`` — made before or after — builds the routed one.
   A module already imported when :func:`activate` runs is patched on the spot.
2. **Inheritance.** :func:`install` sets ``TRACKING_CORE_VERL=1`` and puts the directory of a
   tiny ``sitecustomize`` (``verl_integration/_bootstrap``) first on ``PYTHONPATH``; every child
   interpreter that inherits the environment (subprocesses, torchrun ranks, the workers of a Ray
   instance started after :func:`install`) runs it and activates the hook, then hands over to the
   next ``sitecustomize`` on the path (slime's adapter's bootstrap included).
3. **Ray clusters that do not inherit the driver's environment** (``ray start`` nodes,
   ``ray job submit``): pass :func:`ray_runtime_env` as the job's runtime environment; it
   carries the variables and names :func:`activate` as Ray's ``worker_process_setup_hook``.
   ``python -m verl_integration.install`` prints the lines for a launch script.

Call :func:`install` in the driver before ``ray.init`` (verl's ``main_ppo`` calls it in
``run_ppo``); the limits are slime's (``-E``/``-I``/``-S`` interpreters, an environment rebuilt
without ``PYTHONPATH``, the package at the same path on every node unless Ray's setup hook is
used). :func:`uninstall` puts verl's methods back and removes the hook and the variables.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import json
import logging
import os
import sys
import threading
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("tracking_core.verl.install")

#: Set (to ``1``) in the environment of every process of the job that should route verl's tracking.
ENV_VAR = "TRACKING_CORE_VERL"
#: verl's tracking module.
TRACKING_MODULE = "verl.utils.tracking"
#: Where the ``sitecustomize`` that activates child interpreters lives.
BOOTSTRAP_DIR = Path(__file__).resolve().parent / "_bootstrap"

_lock = threading.RLock()


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


def requested() -> bool:
    """Whether this process's environment asks for the routing (``$TRACKING_CORE_VERL``)."""
    return _truthy(os.environ.get(ENV_VAR))


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


def _patch(module: types.ModuleType) -> None:
    try:
        patch_tracking_module(module)
    except Exception:  # noqa: BLE001 - verl must still import; its own tracking then runs
        log.exception("could not route %s through tracking-core; verl's own code runs", module.__name__)


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


# -- the import hook -----------------------------------------------------------------------------------
class _PatchingLoader(importlib.abc.Loader):
    """The module's own loader, followed by the patch; everything else is the original loader's."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


class VerlTrackingFinder(importlib.abc.MetaPathFinder):
    """Finds ``verl.utils.tracking`` with the finders behind it and wraps its loader so the
    module is patched as soon as it has run."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TRACKING_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, VerlTrackingFinder):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is None:
                continue
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _PatchingLoader(spec.loader)
            return spec
        return None


def _finder() -> VerlTrackingFinder | None:
    for finder in sys.meta_path:
        if isinstance(finder, VerlTrackingFinder):
            return finder
    return None


def is_active() -> bool:
    """Whether the import hook is in place in this process."""
    return _finder() is not None


def activate() -> None:
    """Route verl's tracking in this process: install the import hook (idempotent) and patch
    ``verl.utils.tracking`` if it is already imported. Environment untouched; see :func:`install`.

    Also usable as Ray's ``worker_process_setup_hook``.
    """
    with _lock:
        if _finder() is None:
            sys.meta_path.insert(0, VerlTrackingFinder())
        module = sys.modules.get(TRACKING_MODULE)
        if module is not None:
            _patch(module)


# -- child processes -------------------------------------------------------------------------------------
def bootstrap_dir() -> Path:
    """The directory whose ``sitecustomize`` activates child interpreters."""
    if not (BOOTSTRAP_DIR / "sitecustomize.py").is_file():
        raise FileNotFoundError(
            f"{BOOTSTRAP_DIR / 'sitecustomize.py'} is missing from this installation of "
            "tracking-core, so child processes cannot be reached; reinstall tracking-core "
            "(the file is package data of verl_integration)"
        )
    return BOOTSTRAP_DIR


def _with_path_first(entry: str, value: str | None) -> str:
    parts = [p for p in (value or "").split(os.pathsep) if p and p != entry]
    return os.pathsep.join([entry, *parts])


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a child process needs: ``TRACKING_CORE_VERL`` and ``PYTHONPATH`` with the
    bootstrap first (built on ``environ``, default this process's)."""
    environ = os.environ if environ is None else environ
    return {
        ENV_VAR: "1",
        "PYTHONPATH": _with_path_first(str(bootstrap_dir()), environ.get("PYTHONPATH")),
    }


def install(*, children: bool = True) -> None:
    """Route verl's ``Tracking`` through tracking-core in this process and, with ``children``,
    in every process started from it afterwards (see the module docstring for how and where not).
    """
    activate()
    if children:
        os.environ.update(child_environment())


def uninstall() -> None:
    """Put verl's own methods back; remove the import hook and the environment variables."""
    with _lock:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, VerlTrackingFinder)]
        module = sys.modules.get(TRACKING_MODULE)
        if module is not None:
            unpatch_tracking_module(module)
    os.environ.pop(ENV_VAR, None)
    entry = str(BOOTSTRAP_DIR)
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != entry]
    if rest:
        os.environ["PYTHONPATH"] = os.pathsep.join(rest)
    else:
        os.environ.pop("PYTHONPATH", None)


def ray_runtime_env(runtime_env: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``runtime_env`` (a Ray runtime environment, default empty) plus what Ray workers need:
    the variables of :func:`child_environment` and :func:`activate` as the
    ``worker_process_setup_hook`` unless one is set."""
    out = dict(runtime_env or {})
    env_vars = dict(out.get("env_vars") or {})
    env_vars.update(child_environment({"PYTHONPATH": env_vars.get("PYTHONPATH", "")}))
    out["env_vars"] = env_vars
    out.setdefault("worker_process_setup_hook", "verl_integration.install.activate")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m verl_integration.install [--json]``: what to add to a verl launch."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--json" in argv:
        print(json.dumps(ray_runtime_env({"env_vars": {}})))
        return 0
    env = child_environment({"PYTHONPATH": ""})
    print("# in the launch script (processes started from it route verl's Tracking through tracking-core):")
    print(f"export {ENV_VAR}=1")
    print(f'export PYTHONPATH="{env["PYTHONPATH"]}${{PYTHONPATH:+:$PYTHONPATH}}"')
    print("# then: python -m verl.trainer.main_ppo ... trainer.logger='[console,tracking_core]'")
    print("# for `ray job submit --runtime-env-json` (python -m verl_integration.install --json):")
    print(json.dumps(ray_runtime_env({"env_vars": {}})))
    return 0


class _CallableModule(types.ModuleType):
    """``from verl_integration import install; install()`` works: calling this module calls
    :func:`install` (Python binds the submodule as the package's attribute)."""

    def __call__(self, *, children: bool = True) -> None:
        install(children=children)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return importlib.import_module, (self.__name__,)


if __name__ == "__main__":
    sys.exit(main())
else:
    sys.modules[__name__].__class__ = _CallableModule
