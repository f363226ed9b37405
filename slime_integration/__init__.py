"""Drop-in tracking for slime: parser options, role args, collectors and the tracking drop-ins.

>>> from slime_integration import install
>>> install()          # in the driver, before slime starts its Ray actors

After :func:`install`, slime's own ``init_tracking`` / ``log`` / ``finish_tracking`` calls go
through tracking-core in every process of the job. The names below are imported on first use, so
importing this package (which every child process of an installed job does at start-up) costs
nothing and starts nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module that defines it.
_EXPORTS = {
    "init_tracking": "tracking",
    "log": "tracking",
    "finish_tracking": "tracking",
    "current_run": "tracking",
    "register_plugins": "tracking",
    "uninstall": "install",
    "activate": "install",
    "ray_runtime_env": "install",
    "child_environment": "install",
    "add_tracking_arguments": "options",
    "with_tracking_arguments": "options",
    "resolve_role_args": "role_args",
    "load_role_overrides": "role_args",
    "RoleConfigError": "role_args",
}

#: ``install`` is the submodule itself, which is callable: ``install()`` runs ``install.install()``.
__all__ = sorted([*_EXPORTS, "install"])


def __getattr__(name: str) -> Any:
    if name == "install":
        # ``slime_integration.install`` is always the (callable) submodule, however it is reached:
        # importing it binds it here, as Python binds every submodule to its package.
        return importlib.import_module(f"{__name__}.install")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
