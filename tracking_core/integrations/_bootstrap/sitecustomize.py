"""Start-up hook of tracking-core's host adapters (slime, verl); its directory is put on
``PYTHONPATH`` by their ``install()`` so that every child interpreter runs it.

For each host whose variable is set (``TRACKING_CORE_SLIME``, ``TRACKING_CORE_VERL``: see
``tracking_core.integrations.import_hook.HOST_VARIABLES``) it activates that host's import hook; with none
set it does nothing. Either way it then runs the next ``sitecustomize`` on the path (the one this
file shadows), as Python would have. It imports nothing of tracking-core unless a variable is set.
"""

import importlib
import os
import sys

# Kept in step with tracking_core.integrations.import_hook.HOST_VARIABLES (importing it would import
# tracking-core into every interpreter, asked for or not).
HOSTS = {
    "TRACKING_CORE_SLIME": ("slime_integration.install", "slime"),
    "TRACKING_CORE_VERL": ("verl_integration.install", "verl"),
}


def _activate() -> None:
    for var, (module, host) in HOSTS.items():
        if os.environ.get(var, "").strip().lower() in ("", "0", "false", "no", "off"):
            continue
        try:
            importlib.import_module(module).activate()
        except Exception as exc:  # never keep an interpreter from starting
            sys.stderr.write(
                f"tracking-core: {var} is set but {host}'s tracking could not be routed through "
                f"tracking-core in this process ({type(exc).__name__}: {exc}); {host}'s own "
                "tracking runs\n"
            )


def _run_shadowed_sitecustomize() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    entries = [os.path.abspath(p or os.curdir) for p in sys.path]
    after = entries[entries.index(here) + 1 :] if here in entries else entries
    path = [p for p in after if p != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or spec.origin == __file__:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.stderr.write(f"Error in sitecustomize ({spec.origin}); set PYTHONVERBOSE for details: {exc}\n")


_activate()
_run_shadowed_sitecustomize()
