"""verl's ``Tracking`` and ``ValidationGenerationsLogger``, routed through tracking-core.

verl's trainer builds one ``verl.utils.tracking.Tracking(project_name, experiment_name,
default_backend, config)`` on the driver, with ``default_backend=config.trainer.logger`` and
``config`` the whole resolved OmegaConf; it calls ``log(data=metrics, step=global_steps)`` every
step and ``finish()`` (or leaves it to ``__del__``). After :func:`verl_integration.install`,
the methods here are verl's:

* **Backend names.** ``tracking_core`` selects tracking-core's own choice
  (``$TRACKING_CORE_BACKENDS``, else the embedded default); any other name tracking-core has a
  backend for (``mlflow``, ``wandb``, ``tensorboard``, ``swanlab``, ``trackio``, ``jsonl``, a
  plugin's) goes through tracking-core too. verl's ``console`` (its step printout) and the names
  only verl knows (``file``, ``clearml``, ``vemlp_wandb``, ...) stay verl's own; a name neither
  knows fails with verl's own assertion (``foo is not supported``).
* **One run**, named ``experiment_name``; ``project_name`` is the MLflow experiment and the W&B
  project, and TensorBoard writes where verl's does (``$TENSORBOARD_DIR``, else
  ``tensorboard_log/<project>/<experiment>``), unless the tracker's own variable says otherwise.
* **Config**: the whole config as the launch config, and one namespace per role from verl's
  sections (:mod:`verl_integration.roles`).
* **Metrics**: verl's names unchanged (``actor/pg_loss``, ``critic/vf_loss``, ``timing_s/gen``)
  at verl's step. ``log`` only enqueues; it never blocks and never raises.
* **finish(exit_code)** ends the run (FINISHED, FAILED for a non-zero exit code), once.
* **Validation generations**: ``ValidationGenerationsLogger.log(loggers, samples, step)`` logs
  the ``(input, output, score)`` samples as the table ``val/generations`` (columns ``input``,
  ``output``, ``score``) at ``step`` when tracking-core has tables.

A wrong tracking configuration (a backend whose library is missing, say) raises when ``Tracking``
is built, before training starts, as verl's own backends do.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("tracking_core.verl")

#: The backend name that selects tracking-core's own choice of backends.
SELECT_NAME = "tracking_core"
#: Where the adapter sits in ``Tracking.logger`` (verl's dict of backend name -> logger).
LOGGER_KEY = "tracking_core"
#: verl names kept as verl's even though tracking-core has a backend of that name.
VERL_OWN = frozenset({"console"})
#: The table verl's validation samples go to, and its columns.
GENERATIONS_TABLE = "val/generations"
GENERATIONS_COLUMNS = ("input", "output", "score")
#: Set on a patched class: what it had before.
ORIGINALS_ATTR = "__tracking_core_originals__"

_lock = threading.Lock()
_current: VerlRun | None = None
_warned: set[str] = set()


def _warn_once(key: str, msg: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(msg, *args)


def backend_names(value: Any) -> list[str]:
    """verl's ``default_backend`` / ``loggers`` (a string, a list, an OmegaConf ``ListConfig``)
    as a list of names."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(name) for name in value]


def split_backends(names: Iterable[str]) -> tuple[list[str], list[str], bool]:
    """``(routed, verl's own, select)``: the names tracking-core takes, the names left to verl
    (including unknown ones, for verl's own assertion), and whether ``tracking_core`` was named."""
    from tracking_core import get_plugin_manager

    known = set(get_plugin_manager().backends)
    routed: list[str] = []
    own: list[str] = []
    select = False
    for name in names:
        if name == SELECT_NAME:
            select = True
        elif name in known and name not in VERL_OWN:
            if name not in routed:
                routed.append(name)
        else:
            own.append(name)
    return routed, own, select


def _selected(routed: Sequence[str], select: bool) -> list[str] | None:
    """The backends of the run: the named ones, plus tracking-core's own choice for
    ``tracking_core`` (None: that choice alone)."""
    if not select:
        return list(routed)
    if not routed:
        return None
    from tracking_core import get_plugin_manager
    from tracking_core.host_api import resolve_backend_names

    chosen, _ = resolve_backend_names(manager=get_plugin_manager())
    return list(dict.fromkeys([*chosen, *routed]))


def _verl_options(project: str | None, experiment: str | None) -> dict[str, Any]:
    """TensorBoard where verl's own adapter writes (``tensorboard_log/<project>/<experiment>``)
    unless ``$TENSORBOARD_DIR`` is set."""
    if os.environ.get("TENSORBOARD_DIR") or not project or not experiment:
        return {}
    from tracking_core.host_api import path_under

    # The names stay inside tensorboard_log/ whatever they hold (tracking_core.names).
    where = Path("tensorboard_log", path_under(project, "project name"), path_under(experiment, "experiment name"))
    return {"tensorboard_dir": str(where.absolute())}


class VerlRun:
    """What sits in ``Tracking.logger["tracking_core"]``: verl calls its ``log(data, step)``
    with every other logger's, and ``Tracking.finish`` calls its ``finish``."""

    def __init__(self, host_run: Any, routed: Sequence[str]) -> None:
        self.host_run = host_run
        self.routed = list(routed)

    @classmethod
    def start(
        cls,
        project_name: str | None,
        experiment_name: str | None,
        routed: Sequence[str],
        select: bool,
        config: Any,
    ) -> VerlRun:
        """Start the job's run and log verl's config: the launch config and each role's."""
        from tracking_core.host_api import HostRun

        from . import roles

        host_run = HostRun(
            "verl",
            name=str(experiment_name) if experiment_name else None,
            project=str(project_name) if project_name else None,
            backends=_selected(routed, select),
            options=_verl_options(project_name, experiment_name),
        )
        host_run.start(roles.launch_config(config) if config is not None else None)
        if config is not None:
            for role, values in roles.role_configs(config).items():
                host_run.log_config(values, role=role)
        return cls(host_run, routed)

    @property
    def run(self) -> Any:
        """The tracking-core ``Run``."""
        return self.host_run.run

    def log(self, data: Mapping[str, Any], step: int | None) -> None:
        """verl's metrics, names unchanged, at verl's step; never blocks, never raises."""
        self.host_run.log_metrics(data, step=_step(step))

    def log_generations(self, samples: Sequence[Sequence[Any]], step: int | None) -> None:
        """verl's validation samples ``(input, output, score)`` as the ``val/generations`` table."""
        rows = [tuple(sample)[: len(GENERATIONS_COLUMNS)] for sample in samples]
        rows = [row + (None,) * (len(GENERATIONS_COLUMNS) - len(row)) for row in rows]
        self.host_run.log_table(GENERATIONS_TABLE, GENERATIONS_COLUMNS, rows, step=_step(step))

    def finish(self, exit_code: int = 0) -> None:
        """End the run: FINISHED, or FAILED for a non-zero exit code; never raises."""
        global _current
        with _lock:
            if _current is self:
                _current = None
        self.host_run.finish("FINISHED" if not exit_code else "FAILED")


def _step(step: Any) -> int | None:
    try:
        return None if step is None else int(step)
    except (TypeError, ValueError):
        return None


def current() -> VerlRun | None:
    """The run the latest ``Tracking`` of this process opened (None when none is open)."""
    return _current


# -- the methods put on verl's classes -------------------------------------------------------------
def _original(cls: type, name: str) -> Callable[..., Any]:
    return getattr(cls, ORIGINALS_ATTR)[name]


def tracking_init(
    self: Any,
    project_name: Any,
    experiment_name: Any,
    default_backend: Any = "console",
    config: Any = None,
) -> None:
    """``Tracking.__init__``: verl's own backends as before, tracking-core's through one run."""
    global _current
    names = backend_names(default_backend)
    routed, own, select = split_backends(names)
    _original(type(self), "__init__")(self, project_name, experiment_name, own, config)
    if not routed and not select:
        return
    adapter = VerlRun.start(project_name, experiment_name, routed, select, config)
    self.logger[LOGGER_KEY] = adapter
    with _lock:
        _current = adapter


def tracking_log(self: Any, data: Any, step: Any, backend: Any = None) -> None:
    """``Tracking.log``: a ``backend`` filter naming a routed backend reaches tracking-core."""
    adapter = getattr(self, "logger", {}).get(LOGGER_KEY)
    if backend is not None and isinstance(adapter, VerlRun):
        wanted = backend_names(backend)
        if SELECT_NAME in wanted or any(name in adapter.routed for name in wanted):
            backend = [*wanted, LOGGER_KEY]
    _original(type(self), "log")(self, data=data, step=step, backend=backend)


def tracking_finish(self: Any, exit_code: int = 0) -> None:
    """``Tracking.finish``: verl's own backends, then the run (once, like verl's)."""
    already = getattr(self, "_finished", False)
    original = _original(type(self), "finish")
    try:
        if original is not None:
            original(self, exit_code=exit_code)
        else:  # a verl without Tracking.finish
            self._finished = True
    finally:
        adapter = getattr(self, "logger", {}).get(LOGGER_KEY)
        if not already and isinstance(adapter, VerlRun):
            adapter.finish(exit_code)


def generations_log(self: Any, loggers: Any, samples: Any, step: Any) -> None:
    """``ValidationGenerationsLogger.log``: verl's own loggers as before; the samples go to
    tracking-core's run as a table when a routed name is among ``loggers``."""
    names = backend_names(loggers)
    try:
        routed, own, select = split_backends(names)
    except Exception:  # noqa: BLE001 - a plugin failure must not stop validation
        log.warning("tracking-core backends unavailable; validation samples go to verl's loggers", exc_info=True)
        routed, own, select = [], names, False
    if own:
        _original(type(self), "log")(self, own, samples, step)
    if not routed and not select:
        return
    adapter = current()
    if adapter is None:
        _warn_once(
            "generations",
            "validation generations at step %s not logged: no tracking-core run is open in this "
            "process (verl's Tracking opens it on the driver)",
            step,
        )
        return
    try:
        adapter.log_generations(list(samples), step)
    except Exception as exc:  # noqa: BLE001 - never raise into verl's loop
        _warn_once("generations-fail", "could not log validation generations (%s: %s)", type(exc).__name__, exc)


#: Class name in ``verl.utils.tracking`` -> method name -> the replacement.
REPLACEMENTS: dict[str, dict[str, Callable[..., Any]]] = {
    "Tracking": {"__init__": tracking_init, "log": tracking_log, "finish": tracking_finish},
    "ValidationGenerationsLogger": {"log": generations_log},
}


def reset() -> None:
    """Finish the open run of this process and forget it (tests; a process leaving verl)."""
    global _current
    with _lock:
        adapter, _current = _current, None
    if adapter is not None:
        adapter.finish()
    _warned.clear()
