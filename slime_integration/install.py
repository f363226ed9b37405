"""Put the drop-ins in place of slime's tracking functions in every process of the job.

A slime job is many interpreters: the driver (``train.py``), Ray actors (the rollout manager, one
per Megatron rank of the actor and the critic) that import slime afresh, and whatever those start.
Replacing ``logging_utils.init_tracking`` in the driver reaches none of the others, and even in the
driver a module that already ran ``from slime.observability.logging_utils import init_tracking``
keeps the old function. So :func:`install` works at import time, in every process:

1. **An import hook.** :func:`activate` puts a finder at the front of ``sys.meta_path``. When slime's
   tracking module (:data:`TRACKING_MODULES`) is imported, the hook lets the normal loader run it and
   then replaces ``init_tracking``, ``log`` and ``finish_tracking`` in it, *before* any other module
   can import them: every ``from ... import init_tracking`` made afterwards binds ours. It also adds
   the tracking options to slime's parser (``slime.utils.arguments``). Modules already imported
   when :func:`activate` runs are patched on the spot, and every module-level name bound to one of
   slime's original functions is rebound.
2. **Inheritance.** :func:`install` also sets ``TRACKING_CORE_SLIME=1`` and puts the directory of a
   tiny ``sitecustomize`` shipped with this package (``slime_integration/_bootstrap``) at the front
   of ``PYTHONPATH``. Python imports ``sitecustomize`` at start-up, so every child interpreter that
   inherits the environment (subprocesses, torchrun ranks, Ray workers of a Ray instance started
   after :func:`install`) runs it; it calls :func:`activate` when the variable is set, then hands
   over to any other ``sitecustomize`` on the path. This is how ``opentelemetry-instrument`` and
   ``ddtrace-run`` reach every process; it needs no file written outside the package and does
   nothing in interpreters that lack the variable.
3. **Ray clusters that do not inherit the driver's environment** (nodes started with ``ray start``,
   jobs sent with ``ray job submit``): pass :func:`ray_runtime_env` as the *job's* runtime
   environment (``ray.init(runtime_env=...)`` or ``--runtime-env-json``). It carries the variable
   and the ``PYTHONPATH`` entry, and names :func:`activate` as Ray's ``worker_process_setup_hook``,
   which Ray runs in every worker of the job (only from the job's runtime environment; in an
   actor's own ``runtime_env`` Ray ignores it, while the variables still work there). slime's
   per-actor ``runtime_env`` adds only ``env_vars``, which Ray merges with the job's.
   ``python -m slime_integration.install`` prints the lines to add to a launch script.

Limits: an interpreter started with ``-E``, ``-I`` or ``-S``, or with an environment rebuilt without
``PYTHONPATH``, does not run the bootstrap (call :func:`activate` in it yourself); another
``sitecustomize`` placed before ours on ``PYTHONPATH`` runs instead of ours unless it, too, hands
over; the ``PYTHONPATH`` entry is the path of this installation, so other nodes need the package
at the same path (Ray's setup hook does not).

:func:`uninstall` puts slime's functions back and removes the hook and the variables.
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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

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
#: Where the ``sitecustomize`` that activates child interpreters lives.
BOOTSTRAP_DIR = Path(__file__).resolve().parent / "_bootstrap"

_lock = threading.RLock()


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


def requested() -> bool:
    """Whether this process's environment asks for the drop-ins (``$TRACKING_CORE_SLIME``)."""
    return _truthy(os.environ.get(ENV_VAR))


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


def _patch(module: types.ModuleType) -> None:
    patcher = _PATCHERS.get(module.__name__)
    if patcher is None:
        return
    try:
        patcher(module)
    except Exception:  # noqa: BLE001 - slime must still import; its own tracking then runs
        log.exception(
            "could not put tracking-core in place in %s; slime's own code runs there",
            module.__name__,
        )


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
        # get_source, get_code, is_package, get_resource_reader, ...: the real loader's.
        return getattr(self.loader, name)


class SlimeTrackingFinder(importlib.abc.MetaPathFinder):
    """Finds slime's tracking and argument modules with the finders behind it, and wraps their
    loader so the module is patched as soon as it has run."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _PATCHERS:
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, SlimeTrackingFinder):
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


def _finder() -> SlimeTrackingFinder | None:
    for finder in sys.meta_path:
        if isinstance(finder, SlimeTrackingFinder):
            return finder
    return None


def is_active() -> bool:
    """Whether the import hook is in place in this process."""
    return _finder() is not None


def activate() -> None:
    """Use the drop-ins in this process: install the import hook (idempotent) and patch slime's
    modules that are already imported. Environment untouched; see :func:`install`.

    Also usable as Ray's ``worker_process_setup_hook``.
    """
    with _lock:
        if _finder() is None:
            sys.meta_path.insert(0, SlimeTrackingFinder())
        for name in _PATCHERS:
            module = sys.modules.get(name)
            if module is not None:
                _patch(module)


# -- child processes -------------------------------------------------------------------------------------
def bootstrap_dir() -> Path:
    """The directory whose ``sitecustomize`` activates child interpreters."""
    if not (BOOTSTRAP_DIR / "sitecustomize.py").is_file():
        raise FileNotFoundError(
            f"{BOOTSTRAP_DIR / 'sitecustomize.py'} is missing from this installation of "
            "tracking-core, so child processes cannot be reached; reinstall tracking-core "
            "(the file is package data of slime_integration)"
        )
    return BOOTSTRAP_DIR


def _with_path_first(entry: str, value: str | None) -> str:
    parts = [p for p in (value or "").split(os.pathsep) if p and p != entry]
    return os.pathsep.join([entry, *parts])


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a child process needs to use the drop-ins: ``TRACKING_CORE_SLIME`` and
    ``PYTHONPATH`` with the bootstrap first (built on ``environ``, default this process's)."""
    environ = os.environ if environ is None else environ
    return {
        ENV_VAR: "1",
        "PYTHONPATH": _with_path_first(str(bootstrap_dir()), environ.get("PYTHONPATH")),
    }


def install(*, children: bool = True) -> None:
    """Use tracking-core in place of slime's tracking in this process and, with ``children``,
    in every process started from it afterwards (see the module docstring for how and where not).

    Call it in the driver before slime creates its Ray actors (best: before ``ray.init`` and
    before importing slime, though modules imported earlier are patched too).
    """
    activate()
    if children:
        os.environ.update(child_environment())
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
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, SlimeTrackingFinder)]
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
    os.environ.pop(ENV_VAR, None)
    entry = str(BOOTSTRAP_DIR)
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != entry]
    if rest:
        os.environ["PYTHONPATH"] = os.pathsep.join(rest)
    else:
        os.environ.pop("PYTHONPATH", None)


def ray_runtime_env(runtime_env: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``runtime_env`` (a Ray runtime environment, default empty) plus what Ray workers need to
    use the drop-ins: the environment of :func:`child_environment` (a ``PYTHONPATH`` already in
    ``runtime_env`` is kept, after the bootstrap) and :func:`activate` as the
    ``worker_process_setup_hook`` unless one is set."""
    out = dict(runtime_env or {})
    env_vars = dict(out.get("env_vars") or {})
    env_vars.update(child_environment({"PYTHONPATH": env_vars.get("PYTHONPATH", "")}))
    out["env_vars"] = env_vars
    out.setdefault("worker_process_setup_hook", "slime_integration.install.activate")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m slime_integration.install [--json]``: what to add to a slime launch."""
    argv = list(sys.argv[1:] if argv is None else argv)
    env = child_environment({"PYTHONPATH": ""})
    if "--json" in argv:
        print(json.dumps(ray_runtime_env({"env_vars": {}})))
        return 0
    print("# in the launch script (processes started from it use tracking-core's drop-ins):")
    print(f"export {ENV_VAR}=1")
    print(f'export PYTHONPATH="{env["PYTHONPATH"]}${{PYTHONPATH:+:$PYTHONPATH}}"')
    print("# for `ray job submit --runtime-env-json`, merge in (python -m slime_integration.install --json):")
    print(json.dumps(ray_runtime_env({"env_vars": {}})))
    return 0


class _CallableModule(types.ModuleType):
    """Python binds a package's submodule as the package's attribute, so the package's ``install``
    is this module, not the function: calling the module calls :func:`install`, and
    ``from slime_integration import install; install()`` works however it was imported."""

    def __call__(self, *, children: bool = True) -> None:
        install(children=children)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # Pickled by name, as plain modules are (Ray pickles functions that refer to it).
        return importlib.import_module, (self.__name__,)


if __name__ == "__main__":
    sys.exit(main())
else:
    sys.modules[__name__].__class__ = _CallableModule
