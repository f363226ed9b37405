"""Lightning adapter: ``from tracking_core.integrations.lightning import TrackingCoreLogger``.

>>> trainer = Trainer(logger=TrackingCoreLogger(name="mnist", project="vision"), max_steps=100)
>>> trainer.fit(model)       # hyperparameters -> launch config, self.log(...) -> metrics

Importing this module does not import Lightning; the class is defined (from
``lightning.pytorch.loggers.Logger``) when it is first looked up. See :mod:`._lightning_logger`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._lightning_logger import TrackingCoreLogger

__all__ = ["TrackingCoreLogger"]


def __getattr__(name: str) -> Any:
    if name == "TrackingCoreLogger":
        from ._lightning_logger import TrackingCoreLogger

        globals()[name] = TrackingCoreLogger
        return TrackingCoreLogger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
