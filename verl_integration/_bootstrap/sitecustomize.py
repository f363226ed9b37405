"""Start-up hook of tracking-core's verl adapter; its directory is put on ``PYTHONPATH`` by
``verl_integration.install()`` so that every child interpreter runs it.

With ``TRACKING_CORE_VERL`` set it activates the import hook that routes verl's ``Tracking``
through tracking-core; without it, it does nothing. Either way it then runs the next
``sitecustomize`` on the path (the one this file shadows, which may be another adapter's), as
Python would have. It runs once per interpreter even when bootstraps hand over to each other.
"""

import os
import sys
import types

_MARK = "_tracking_core_verl_bootstrap"


def _activate() -> None:
    if os.environ.get("TRACKING_CORE_VERL", "").strip().lower() in ("", "0", "false", "no", "off"):
        return
    try:
        from verl_integration.install import activate

        activate()
    except Exception as exc:  # never keep an interpreter from starting
        sys.stderr.write(
            f"tracking-core: TRACKING_CORE_VERL is set but verl's tracking could not be routed "
            f"in this process ({type(exc).__name__}: {exc}); verl's own tracking runs\n"
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


if _MARK not in sys.modules:
    sys.modules[_MARK] = types.ModuleType(_MARK)
    _activate()
    _run_shadowed_sitecustomize()
