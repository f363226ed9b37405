"""``TrackingCoreLogger``: tracking-core as a Lightning logger.

In Lightning's terms: ``name`` is the experiment (it becomes the MLflow experiment and the W&B
project) and ``version`` the run (default: tracking-core's run id). The Trainer calls, on every
rank, and the logger acts on global rank zero only (``rank_zero_only``, as Lightning's own
loggers do):

* ``log_hyperparams(params)`` — the LightningModule's (and datamodule's) saved hyperparameters:
  the run's launch config, merged over calls;
* ``log_metrics(metrics, step)`` — what ``self.log(...)`` produced, under Lightning's names, at
  the trainer's global step;
* ``save()`` — nothing to do: records are journaled in the background as they are logged;
* ``finalize(status)`` — end of ``fit``/``validate``/``test``: the run ends (``success`` →
  FINISHED, ``failed`` → FAILED). A later ``trainer.test()`` on the same logger resumes the same
  run.

The run starts on first use: ``experiment`` (the tracking-core ``Run``), ``version``, or the
first logged value.
"""

from __future__ import annotations

import os
from argparse import Namespace
from collections.abc import Mapping, Sequence
from typing import Any

from lightning.fabric.utilities.logger import _convert_params
from lightning.pytorch.loggers.logger import Logger, rank_zero_experiment
from lightning.pytorch.utilities import rank_zero_only
from typing_extensions import override

from .host_run import HostRun

__all__ = ["TrackingCoreLogger"]

#: Lightning's finalize statuses -> tracking-core's.
_STATUS = {"success": "FINISHED", "finished": "FINISHED", "failed": "FAILED"}


class TrackingCoreLogger(Logger):
    """A Lightning logger that logs through tracking-core (one run per logger).

    ``name`` is the experiment (MLflow experiment / W&B project unless ``MLFLOW_EXPERIMENT_NAME``
    / ``WANDB_PROJECT`` say otherwise); ``version`` names the run; ``backends``,
    ``tracking_dir`` and ``options`` are as for ``tracking_core.start_run`` (default
    ``$TRACKING_CORE_BACKENDS``, else the embedded default).
    """

    def __init__(
        self,
        name: str = "lightning_logs",
        version: str | None = None,
        *,
        backends: Sequence[str] | str | None = None,
        tracking_dir: str | os.PathLike[str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self._name = name
        self._version = version
        self.host_run = HostRun(
            "lightning",
            name=version,
            project=name,
            backends=backends,
            tracking_dir=tracking_dir,
            options=options,
        )

    @property
    @override
    def name(self) -> str:
        """The experiment name."""
        return self._name

    @property
    @override
    def version(self) -> str | None:
        """The run: the ``version`` given, else the run id (on rank zero, where the run is)."""
        if self._version is not None:
            return self._version
        run = self._rank_zero_run()
        return str(run.run_id) if run is not None else None

    @property
    @rank_zero_experiment
    def experiment(self) -> Any:
        """The tracking-core ``Run`` (a no-op object on other ranks)."""
        return self._rank_zero_run()

    def _rank_zero_run(self) -> Any:
        if getattr(rank_zero_only, "rank", 0) != 0:
            return None
        host = self.host_run
        if host.run is None:
            host.live("experiment")
        return host.run

    @override
    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        """Log the hyperparameters as the run's launch config (merged with earlier calls)."""
        self.host_run.log_config(_convert_params(params))

    @override
    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Queue ``metrics`` at ``step``; never blocks, never raises."""
        self.host_run.log_metrics(metrics, step=step)

    @override
    @rank_zero_only
    def save(self) -> None:
        """Nothing to do: what was logged is journaled in the background within half a second."""

    @override
    @rank_zero_only
    def finalize(self, status: str) -> None:
        """End the run: ``success``/``finished`` -> FINISHED, ``failed`` -> FAILED."""
        self.host_run.finish(_STATUS.get(status, "FINISHED"))
