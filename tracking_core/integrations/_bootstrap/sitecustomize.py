"""Start-up hook of tracking-core's host adapters; its directory is put on ``PYTHONPATH`` by their
``install()`` so that every child interpreter runs it.

For each host whose variable is set (``TRACKING_CORE_<HOST>``, the hosts being the entry points
of the ``tracking_core.hosts`` group: see ``tracking_core.integrations.import_hook``) it activates
that host's import hook; with none set it does nothing. Either way it then runs the next
``sitecustomize`` on the path (the one this file shadows), as Python would have. It imports
nothing of tracking-core unless a host's variable is set, and reads the entry points only when
some ``TRACKING_CORE_*`` variable is set: an interpreter that asks for nothing pays a look at its
environment.
"""

import os
import sys

# The same rules as tracking_core.integrations.import_hook (HOSTS_GROUP, host_variable, truthy):
# importing it would import tracking-core into every interpreter, asked for or not.
GROUP = "tracking_core.hosts"
PREFIX = "TRACKING_CORE_"


def _truthy(value: str) -> bool:
    return value.strip().lower() not in ("", "0", "false", "no", "off")


def _activate() -> None:
    asked = {name for name, value in os.environ.items() if name.startswith(PREFIX) and _truthy(value)}
    if not asked:
        return
    from importlib.metadata import entry_points

    seen = set()
    for ep in entry_points(group=GROUP):
        var = PREFIX + "".join(c if c.isascii() and c.isalnum() else "_" for c in ep.name).upper()
        if var not in asked or ep.name in seen:
            continue
        seen.add(ep.name)
        try:
            ep.load().activate()
        except Exception as exc:  # never keep an interpreter from starting
            sys.stderr.write(
                f"tracking-core: {var} is set but {ep.name}'s tracking could not be routed through "
                f"tracking-core in this process ({type(exc).__name__}: {exc}); {ep.name}'s own "
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
