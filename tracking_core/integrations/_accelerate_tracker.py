"""``TrackingCoreTracker``: tracking-core as one of Accelerate's trackers.

Accelerate drives a tracker through four calls, all on the main process only (its
``main_process_only`` convention, kept here with Accelerate's own ``on_main_process``):

* ``Accelerator.init_trackers(project_name, config)`` calls :meth:`~TrackingCoreTracker.start`
  (the run starts: ``tracking_core.start_run``) and then
  :meth:`~TrackingCoreTracker.store_init_configuration` (the config becomes the launch config);
* ``Accelerator.log(values, step)`` calls :meth:`~TrackingCoreTracker.log` (metrics under
  Accelerate's names, at ``step``);
* ``Accelerator.end_training()`` calls :meth:`~TrackingCoreTracker.finish`.

Accelerate hands a tracker object given in ``log_with`` neither the project name nor
``init_kwargs``, so they are constructor arguments here. The backends are tracking-core's choice
as everywhere (``backends=``, else ``$TRACKING_CORE_BACKENDS``, else the embedded default).

By name (``Accelerator(log_with="tracking_core")``, Accelerate >= 1.16): :func:`register` makes
:class:`NamedTrackingCoreTracker` Accelerate's ``tracking_core`` tracker; Accelerate then builds
it in ``init_trackers`` with the project name and ``init_kwargs["tracking_core"]``. When that
happens is :mod:`tracking_core.integrations.accelerate`'s business.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import accelerate.tracking as accelerate_tracking
from accelerate.tracking import GeneralTracker, on_main_process

from .host_run import HostRun

__all__ = ["NamedTrackingCoreTracker", "TrackingCoreTracker", "register"]


class TrackingCoreTracker(GeneralTracker):
    """An Accelerate tracker that logs through tracking-core (one run per training job).

    ``run_name`` names the run (default: tracking-core's run id); ``project`` becomes the MLflow
    experiment and the W&B project unless ``MLFLOW_EXPERIMENT_NAME`` / ``WANDB_PROJECT`` say
    otherwise; ``backends``, ``tracking_dir`` and ``options`` are as for
    ``tracking_core.start_run``. ``tracker`` is the tracking-core ``Run`` once started.
    """

    name = "tracking_core"
    requires_logging_directory = False
    main_process_only = True

    def __init__(
        self,
        run_name: str | None = None,
        *,
        project: str | None = None,
        backends: Sequence[str] | str | None = None,
        tracking_dir: str | os.PathLike[str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.run_name = run_name
        self.host_run = HostRun(
            "accelerate",
            name=run_name,
            project=project,
            backends=backends,
            tracking_dir=tracking_dir,
            options=options,
        )

    @property
    def tracker(self) -> Any:
        """The tracking-core ``Run`` (None before ``init_trackers`` and on other processes)."""
        return self.host_run.run

    @on_main_process
    def start(self) -> None:
        """Start the run (``Accelerator.init_trackers`` calls this first). A wrong tracking
        configuration raises here, before training, with what to fix."""
        self.host_run.start()

    @on_main_process
    def store_init_configuration(self, values: Mapping[str, Any]) -> None:
        """Log ``values`` (``init_trackers(config=...)``) as the run's launch config."""
        self.host_run.log_config(values)

    @on_main_process
    def log(self, values: Mapping[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Queue ``values`` at ``step`` under Accelerate's names; never blocks, never raises.
        Values that are not numbers are skipped and counted in the run's finish summary."""
        self.host_run.log_metrics(values, step=step)

    @on_main_process
    def finish(self) -> None:
        """Deliver and end the run (``Accelerator.end_training``); never raises."""
        self.host_run.finish()


class NamedTrackingCoreTracker(TrackingCoreTracker):
    """The tracker Accelerate builds for ``log_with="tracking_core"``: Accelerate passes the
    project name of ``init_trackers`` first (the MLflow experiment / W&B project, unless
    ``init_kwargs`` name a ``project``) and ``init_kwargs["tracking_core"]`` as keywords
    (``run_name``, ``backends``, ``tracking_dir``, ``options``)."""

    def __init__(
        self,
        project_name: str | None = None,
        run_name: str | None = None,
        *,
        project: str | None = None,
        backends: Sequence[str] | str | None = None,
        tracking_dir: str | os.PathLike[str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            run_name,
            project=project or project_name,
            backends=backends,
            tracking_dir=tracking_dir,
            options=options,
        )


def register() -> bool:
    """Make ``tracking_core`` a tracker name of Accelerate (its ``register_tracker_class``,
    Accelerate >= 1.16); True when the name is ours afterwards. Idempotent; an Accelerate
    without the function is left as it is (the instance form works with every version)."""
    register_class = getattr(accelerate_tracking, "register_tracker_class", None)
    if register_class is None:
        return False
    registered = getattr(accelerate_tracking, "LOGGER_TYPE_TO_CLASS", {})
    if registered.get(NamedTrackingCoreTracker.name) is not NamedTrackingCoreTracker:
        register_class(NamedTrackingCoreTracker)
    return True
