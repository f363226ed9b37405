"""The one tracking-core run behind a host's tracker or logger object.

Accelerate's ``GeneralTracker`` and Lightning's ``Logger`` (and verl's ``Tracking``) are objects
the host calls from its training loop: ``log``, ``log_metrics``, ``finish``. :class:`HostRun` is
what each adapter holds: it starts the run when the host asks for it (or on first use), logs the
host's config as the launch config, and passes metrics through under the host's own names. Its
promise to the host is the core's: a wrong tracking configuration (an unknown backend, a missing
extra) is a clear error where the run starts, before training; after that no call raises into the
host's loop — a fault is logged once and the loop goes on.

A host that ends the run and then logs again (Lightning finalizes after ``fit`` and then runs
``test``) resumes the same run from its saved handle: one host object, one run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import TrackingError, WarnOnce
from ..records import RunStatus

log = logging.getLogger("tracking_core.integrations")

__all__ = ["HostRun", "project_options"]

def project_options(project: str | None) -> dict[str, Any]:
    """Backend options that name the host's project, from every backend's views (the MLflow
    experiment, the W&B, SwanLab and trackio project), in plugin load order.

    A tracker's own environment variable (``MLFLOW_EXPERIMENT_NAME``, ``WANDB_PROJECT``) wins, as
    it would with the host's own tracker integration: its views then set nothing. Views that
    raise are logged and set nothing.
    """
    if not project:
        return {}
    from ..plugins import get_plugin_manager

    out: dict[str, Any] = {}
    for name, spec in get_plugin_manager().backends.items():
        try:
            options = spec.views.project_options(str(project))
        except Exception as exc:  # noqa: BLE001 - one tracker never stops the host's run
            log.warning("the views of backend %r raised in project_options: %s: %s", name, type(exc).__name__, exc)
            continue
        for dest, value in dict(options or {}).items():
            out.setdefault(dest, value)
    return out


def _status(value: RunStatus | str | None) -> RunStatus | None:
    if value is None or isinstance(value, RunStatus):
        return value
    try:
        return RunStatus(str(value).upper())
    except ValueError:
        return None


class HostRun:
    """A run started for a host (``host`` names it in messages: ``"accelerate"``, ...).

    ``name`` is the run name, ``project`` the host's project (see :func:`project_options`);
    ``backends`` and ``tracking_dir`` are as for :func:`tracking_core.start_run` (default:
    ``$TRACKING_CORE_BACKENDS`` / the embedded default, ``$TRACKING_CORE_DIR``); ``options``
    are further backend options.
    """

    def __init__(
        self,
        host: str,
        *,
        name: str | None = None,
        project: str | None = None,
        backends: Sequence[str] | str | None = None,
        tracking_dir: str | os.PathLike[str] | None = None,
        options: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self.host = host
        self.name = name
        self.project = project
        self.backends = backends
        self.tracking_dir = tracking_dir
        self.options = {**project_options(project), **dict(options or {})}
        self.tags = dict(tags or {})
        self.run: Any = None
        self._config: dict[str, Any] = {}
        self._warn_once = WarnOnce(log)

    # -- the run ---------------------------------------------------------------------------------
    def start(self, config: Any = None) -> Any:
        """Start the run (once; later calls return it) with ``config`` as the launch config.

        Raises :class:`tracking_core.TrackingError` when the tracking configuration is wrong
        (unknown backend, missing extra): that is for the user to fix before training.
        """
        if self.run is not None and self.run.finished is None:
            if config is not None:
                self.log_config(config)
            return self.run
        from ..runs import start_run

        resume = self.run.handle if self.run is not None else None
        if resume is not None:
            self.run = start_run(handle=resume, options=self.options or None, export=False)
            log.info("%s: run %s resumed after it was finished", self.host, self.run.run_id)
        else:
            self.run = start_run(
                backends=self.backends,
                tracking_dir=self.tracking_dir,
                name=self.name,
                options=self.options or None,
                tags=self.tags or None,
            )
        if config is not None:
            self.log_config(config)
        return self.run

    def live(self, what: str = "use") -> Any:
        """The open run, started or resumed if needed; None (said once) when it cannot be."""
        if self.run is not None and self.run.finished is None:
            return self.run
        try:
            return self.start()
        except TrackingError as exc:
            self._warn_once(f"start:{what}", "%s: %s() cannot start a tracking run (%s); nothing is logged", self.host, what, exc)
        except Exception as exc:  # noqa: BLE001 - never raise into the host's loop
            self._warn_once(f"start:{what}", "%s: %s() could not start a tracking run (%s: %s); training goes on", self.host, what, type(exc).__name__, exc)
        return None

    # -- what the host logs ------------------------------------------------------------------------
    def log_config(self, config: Any, role: str | None = None) -> None:
        """Log ``config`` as the launch config (``role=None``) or as ``role``'s.

        Launch configs given in several calls (Lightning logs the module's and the datamodule's
        hyperparameters separately) are merged, so the launch namespace always holds all of them.
        """
        try:
            run = self.live("log_config")
            if run is None:
                return
            if role is None and isinstance(config, Mapping):
                self._config.update(config)
                config = dict(self._config)
            run.log_config(config, role=role)
        except Exception as exc:  # noqa: BLE001
            self._warn_once("config", "%s: could not log a config (%s: %s); training goes on", self.host, type(exc).__name__, exc)

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None, step_key: str | None = None) -> None:
        """Queue ``metrics`` under the host's names at ``step``; never blocks, never raises."""
        try:
            run = self.live("log_metrics")
            if run is not None:
                run.log_metrics(metrics, step=step, step_key=step_key)
        except Exception as exc:  # noqa: BLE001
            self._warn_once("metrics", "%s: could not log metrics (%s: %s); training goes on", self.host, type(exc).__name__, exc)

    def log_table(self, key: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], step: int | None = None) -> bool:
        """Log ``rows`` (cells in ``columns`` order) as the table ``key`` at ``step``; returns
        whether it was handed over."""
        try:
            run = self.live("log_table")
            if run is None:
                return False
            run.log_table(key, [dict(zip(columns, row, strict=False)) for row in rows], step=step)
            return True
        except Exception as exc:  # noqa: BLE001
            self._warn_once("table", "%s: could not log table %r (%s: %s); training goes on", self.host, key, type(exc).__name__, exc)
            return False

    def flush(self, timeout: float = 0.0) -> None:
        """Hand what was logged to the delivery; wait at most ``timeout`` seconds."""
        try:
            if self.run is not None and self.run.finished is None:
                self.run.flush(timeout)
        except Exception as exc:  # noqa: BLE001
            self._warn_once("flush", "%s: flush failed (%s: %s)", self.host, type(exc).__name__, exc)

    def finish(self, status: RunStatus | str | None = None, timeout: float | None = None) -> None:
        """End the run (FINISHED unless ``status`` says otherwise); never raises."""
        run, final = self.run, _status(status)
        if run is None or run.finished is not None:
            return
        try:
            run.finish(timeout=timeout, status=final)  # None: the run's default
        except Exception as exc:  # noqa: BLE001
            self._warn_once("finish", "%s: could not finish the run (%s: %s)", self.host, type(exc).__name__, exc)

