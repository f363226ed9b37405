"""Start-up hook of tracking-core's slime adapter; its directory is put on ``PYTHONPATH`` by
``slime_integration.install()`` so that every child interpreter runs it.

With ``TRACKING_CORE_SLIME`` set it activates the import hook that puts tracking-core's drop-ins in
place of slime's tracking functions; without it, it does nothing. Either way it then runs the next
``sitecustomize`` on the path (the one this file shadows), as Python would have.
"""

import os
import sys


def _activate() -> None:
    if os.environ.get("TRACKING_CORE_SLIME", "").strip().lower() in ("", "0", "false", "no", "off"):
        return
    try:
        from slime_integration.install import activate

        activate()
    except Exception as exc:  # never keep an interpreter from starting
        sys.stderr.write(
            f"tracking-core: TRACKING_CORE_SLIME is set but the slime drop-ins could not be "
            f"activated in this process ({type(exc).__name__}: {exc}); slime's own tracking runs\n"
        )


def _run_shadowed_sitecustomize() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
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
