"""Put tracking-core in place of a host framework's tracking in every process of a job.

A host's job (slime, verl) is many interpreters: the driver, Ray actors that import the host
afresh, torchrun ranks, whatever those start. Patching the host's tracking module in the driver
reaches none of the others, and even in the driver a module that already ran ``from host.tracking
import init`` keeps the old function. So a :class:`HostHook` works at import time, in every
process:

1. **An import hook.** :meth:`HostHook.activate` puts a finder at the front of ``sys.meta_path``.
   When one of the host's modules it knows (``patchers``) is imported, the finder lets the normal
   loader run it and then calls that module's patcher, *before* any other module can import from
   it. Modules already imported when :meth:`~HostHook.activate` runs are patched on the spot.
2. **Inheritance.** :meth:`HostHook.export` sets the host's variable (``TRACKING_CORE_<HOST>=1``,
   :func:`host_variable`) and puts the directory of a tiny ``sitecustomize`` shipped with
   tracking-core (:data:`BOOTSTRAP_DIR`) at the front of ``PYTHONPATH``. Python imports
   ``sitecustomize`` at start-up, so every child interpreter that inherits the environment
   (subprocesses, torchrun ranks, the workers of a Ray instance started afterwards) runs it; it
   activates the hook of each host whose variable is set, then hands over to the
   next ``sitecustomize`` on the path, as Python would have run it. The hosts are the entry
   points of the :data:`HOSTS_GROUP` group (``<host> = "<module with activate()>"``; the adapters
   shipped with tracking-core declare theirs in its ``pyproject.toml``), read only in a process
   where a ``TRACKING_CORE_*`` variable is set. This is how
   ``opentelemetry-instrument`` and ``ddtrace-run`` reach every process; it needs no file written
   outside the package and does nothing in interpreters that lack the variables.
3. **Ray clusters that do not inherit the driver's environment** (nodes started with ``ray start``,
   jobs sent with ``ray job submit``): :meth:`HostHook.ray_runtime_env` is the *job's* runtime
   environment: the variables, and the host's ``activate`` as Ray's ``worker_process_setup_hook``,
   which Ray runs in every worker of the job (only from the job's runtime environment; in an
   actor's own ``runtime_env`` Ray ignores it, while the variables still work there).

Limits: an interpreter started with ``-E``, ``-I`` or ``-S``, or with an environment rebuilt
without ``PYTHONPATH``, does not run the bootstrap (call ``activate()`` in it yourself); another
``sitecustomize`` placed before ours on ``PYTHONPATH`` runs instead of ours unless it, too, hands
over; the ``PYTHONPATH`` entry is the path of this installation, so other nodes need the package
at the same path (Ray's setup hook does not).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import importlib.machinery

#: Where the ``sitecustomize`` that activates child interpreters lives.
BOOTSTRAP_DIR = Path(__file__).resolve().parent / "_bootstrap"
#: The entry-point group of the host adapters: ``<host> = "<module>"``, the module's
#: ``activate()`` installs the host's import hook (the bootstrap ``sitecustomize`` reads it too).
HOSTS_GROUP = "tracking_core.hosts"
#: A host's variable is this prefix and its entry point's name in capitals (:func:`host_variable`).
VARIABLE_PREFIX = "TRACKING_CORE_"

Patcher = Callable[[types.ModuleType], bool]


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


def host_variable(host: str) -> str:
    """The variable that asks for ``host``'s import hook in a process: ``TRACKING_CORE_<HOST>``
    (``slime``: ``TRACKING_CORE_SLIME``; characters other than letters and digits become ``_``)."""
    return VARIABLE_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", host).upper()


def installed_hosts() -> dict[str, str]:
    """Every installed host adapter, host name -> its module (the :data:`HOSTS_GROUP` entry
    points; the first of a name wins, as for plugins)."""
    from ..entry_points import entry_points

    hosts: dict[str, str] = {}
    for ep in entry_points(HOSTS_GROUP):
        hosts.setdefault(ep.name, ep.value)
    return hosts


def host_variables() -> tuple[str, ...]:
    """The variable of each installed host adapter."""
    return tuple(host_variable(host) for host in installed_hosts())


def bootstrap_dir() -> Path:
    """The directory whose ``sitecustomize`` activates child interpreters."""
    if not (BOOTSTRAP_DIR / "sitecustomize.py").is_file():
        raise FileNotFoundError(
            f"{BOOTSTRAP_DIR / 'sitecustomize.py'} is missing from this installation of "
            "tracking-core, so child processes cannot be reached; reinstall tracking-core "
            "(the file is package data of tracking_core.integrations)"
        )
    return BOOTSTRAP_DIR


def _with_path_first(entry: str, value: str | None) -> str:
    parts = [p for p in (value or "").split(os.pathsep) if p and p != entry]
    return os.pathsep.join([entry, *parts])


class _PatchingLoader:
    """The module's own loader, followed by the patch; everything else is the original loader's.
    (No :mod:`importlib.abc` base: the import system asks only for the methods, and importing
    that module costs every ``import tracking_core`` several milliseconds.)"""

    def __init__(self, loader: Any, patch: Callable[[types.ModuleType], None]) -> None:
        self.loader = loader
        self.patch = patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        self.patch(module)

    def __getattr__(self, name: str) -> Any:
        # get_source, get_code, is_package, get_resource_reader, ...: the real loader's.
        return getattr(self.loader, name)


class HostFinder:
    """Finds a host's patched modules with the finders behind it, and wraps their loader so the
    module is patched as soon as it has run."""

    def __init__(self, hook: HostHook) -> None:
        self.hook = hook

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.hook.patchers:
            return None
        for finder in sys.meta_path:
            if isinstance(finder, HostFinder):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is None:
                continue
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _PatchingLoader(spec.loader, self.hook.patch)
            return spec
        return None


class HostHook:
    """The import hook and environment of one host: ``env_var`` asks for it in a process,
    ``patchers`` maps each of the host's module names to the function that patches it (True
    when it changed something), ``setup_hook`` names the host's ``activate`` for Ray."""

    #: The finder put on ``sys.meta_path`` (a subclass names a hook that is not a host's).
    finder_class: type[HostFinder] = HostFinder

    def __init__(
        self, *, host: str, env_var: str, patchers: Mapping[str, Patcher], setup_hook: str, log: Any
    ) -> None:
        self.host = host
        self.env_var = env_var
        self.patchers = patchers  # the adapter's own mapping (read at each import)
        self.setup_hook = setup_hook
        self.log = log
        self.lock = threading.RLock()

    def requested(self) -> bool:
        """Whether this process's environment asks for the hook (its variable is set)."""
        return truthy(os.environ.get(self.env_var))

    def patch(self, module: types.ModuleType) -> None:
        patcher = self.patchers.get(module.__name__)
        if patcher is None:
            return
        try:
            patcher(module)
        except Exception:  # noqa: BLE001 - the host must still import; its own tracking then runs
            self.log.exception(
                "could not put tracking-core in place in %s; %s's own code runs there", module.__name__, self.host
            )

    def finder(self) -> HostFinder | None:
        for finder in sys.meta_path:
            if isinstance(finder, HostFinder) and finder.hook is self:
                return finder
        return None

    def is_active(self) -> bool:
        """Whether the import hook is in place in this process."""
        return self.finder() is not None

    def activate(self) -> None:
        """Install the import hook (idempotent) and patch the host's modules already imported.
        The environment is left as it is (see :meth:`export`)."""
        with self.lock:
            if self.finder() is None:
                sys.meta_path.insert(0, self.finder_class(self))
            for name in self.patchers:
                module = sys.modules.get(name)
                if module is not None:
                    self.patch(module)

    def deactivate(self) -> None:
        """Remove the import hook (the patches are the host adapter's to undo)."""
        with self.lock:
            sys.meta_path[:] = [f for f in sys.meta_path if not (isinstance(f, HostFinder) and f.hook is self)]

    # -- child processes ------------------------------------------------------------------------
    def child_environment(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The variables a child process needs: the host's variable and ``PYTHONPATH`` with the
        bootstrap first (built on ``environ``, default this process's)."""
        environ = os.environ if environ is None else environ
        return {
            self.env_var: "1",
            "PYTHONPATH": _with_path_first(str(bootstrap_dir()), environ.get("PYTHONPATH")),
        }

    def export(self) -> None:
        """Set :meth:`child_environment` in this process's environment (its children inherit it)."""
        os.environ.update(self.child_environment())

    def unexport(self) -> None:
        """Remove the host's variable, and the bootstrap from ``PYTHONPATH`` unless another
        host's variable still needs it."""
        os.environ.pop(self.env_var, None)
        if any(truthy(os.environ.get(var)) for var in host_variables() if var != self.env_var):
            return
        entry = str(BOOTSTRAP_DIR)
        rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != entry]
        if rest:
            os.environ["PYTHONPATH"] = os.pathsep.join(rest)
        else:
            os.environ.pop("PYTHONPATH", None)

    def ray_runtime_env(self, runtime_env: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``runtime_env`` (a Ray runtime environment, default empty) plus what Ray workers need:
        the variables of :meth:`child_environment` (a ``PYTHONPATH`` already in ``runtime_env``
        is kept, after the bootstrap) and the host's ``activate`` as the
        ``worker_process_setup_hook`` unless one is set."""
        out = dict(runtime_env or {})
        env_vars = dict(out.get("env_vars") or {})
        env_vars.update(self.child_environment({"PYTHONPATH": env_vars.get("PYTHONPATH", "")}))
        out["env_vars"] = env_vars
        out.setdefault("worker_process_setup_hook", self.setup_hook)
        return out

    def print_launch(self, argv: Sequence[str] | None, *, module: str, after: Sequence[str] = ()) -> int:
        """``python -m <module> [--json]``: the lines to add to a launch script (``after``:
        further comment lines), or with ``--json`` the job's Ray runtime environment."""
        import json

        argv = list(sys.argv[1:] if argv is None else argv)
        runtime = json.dumps(self.ray_runtime_env({"env_vars": {}}))
        if "--json" in argv:
            print(runtime)
            return 0
        env = self.child_environment({"PYTHONPATH": ""})
        print(f"# in the launch script (processes started from it use tracking-core for {self.host}'s tracking):")
        print(f"export {self.env_var}=1")
        print(f'export PYTHONPATH="{env["PYTHONPATH"]}${{PYTHONPATH:+:$PYTHONPATH}}"')
        for line in after:
            print(line)
        print(f"# for `ray job submit --runtime-env-json`, merge in (python -m {module} --json):")
        print(runtime)
        return 0


class InstallModule(types.ModuleType):
    """Python binds a package's submodule as the package's attribute, so a package's ``install``
    is its ``install`` module, not the function: calling the module calls its ``install``
    function, and ``from host_integration import install; install()`` works however it was
    imported. Set as the ``__class__`` of the module."""

    def __call__(self, *, children: bool = True) -> None:
        self.__dict__["install"](children=children)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # Pickled by name, as plain modules are (Ray pickles functions that refer to it).
        return importlib.import_module, (self.__name__,)
