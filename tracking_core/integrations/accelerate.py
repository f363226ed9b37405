"""Accelerate adapter: ``from tracking_core.integrations.accelerate import TrackingCoreTracker``.

>>> accelerator = Accelerator(log_with=[TrackingCoreTracker(run_name="sft-7b", project="sft")])
>>> accelerator.init_trackers("sft", config={"lr": 3e-4})   # starts the run, logs the config
>>> accelerator.log({"train/loss": 0.42}, step=10)
>>> accelerator.end_training()                              # finishes the run

Importing this module does not import accelerate; the class is defined (from Accelerate's
``GeneralTracker``) when it is first looked up. See :mod:`._accelerate_tracker`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._accelerate_tracker import TrackingCoreTracker

__all__ = ["TrackingCoreTracker"]


def __getattr__(name: str) -> Any:
    if name == "TrackingCoreTracker":
        from ._accelerate_tracker import TrackingCoreTracker

        globals()[name] = TrackingCoreTracker
        return TrackingCoreTracker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
