"""tracking-core for verl: verl's own ``Tracking`` class, routed through tracking-core.

>>> import verl_integration
>>> verl_integration.install()   # in the driver, before ray.init (verl's run_ppo)

After :func:`install`, ``trainer.logger='[console,tracking_core]'`` (or any backend name
tracking-core knows: ``mlflow``, ``wandb``, ``tensorboard``, ...) makes verl's
``verl.utils.tracking.Tracking`` log one run through tracking-core, in every process of the job:
the launch config plus one namespace per role (``actor/``, ``rollout/``, ``ref/``, ``critic/``,
``reward_model/``), verl's metrics unchanged at verl's step, validation generations as a table.
See :mod:`verl_integration.tracking` and :mod:`verl_integration.roles`.

The names below are imported on first use: importing this package (which every child process of
an installed job does at start-up) imports neither verl nor tracking-core's backends.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module that defines it.
_EXPORTS = {
    "uninstall": "install",
    "activate": "install",
    "ray_runtime_env": "install",
    "child_environment": "install",
    "current": "tracking",
    "role_configs": "roles",
    "launch_config": "roles",
    "ROLE_SECTIONS": "roles",
}

#: ``install`` is the submodule itself, which is callable: ``install()`` runs ``install.install()``.
__all__ = sorted([*_EXPORTS, "install"])


def __getattr__(name: str) -> Any:
    if name == "install":  # ``verl_integration.install()`` without importing the submodule first
        return importlib.import_module(f"{__name__}.install")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
