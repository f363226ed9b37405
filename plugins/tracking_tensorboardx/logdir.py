"""Where a run's TensorBoard files go, decided without tensorboardX and without creating anything.

:func:`target` is the backend's declared target: the run's log directory, computed once in the
training process when the run starts and saved in the run handle; the primary's ``open_run`` and
every secondary write where it says. The directory is never decided again later: the default
one moves aside when it already holds another run's events, and a second decision, once this
run has written its own events there, would move this run's later writers aside too.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tracking_core.names import path_part
from tracking_core.plugin_api import RunContext

from . import DIR_DEST, DIR_ENV

log = logging.getLogger("tracking_core.backends.tensorboard")


def _has_events(path: Path) -> bool:
    try:
        return any(".tfevents." in p.name for p in path.rglob("*"))
    except OSError:
        return False


def default_logdir(run: RunContext, *, avoid_reuse: bool = False) -> Path:
    """``--tensorboard-dir``, else ``$TENSORBOARD_DIR``, else ``<tracking_dir>/tensorboard/<name>``.

    An explicit directory is the run's log dir as given (as Megatron and slime use it). The
    default is named for the run (its id unless it was given a name); with ``avoid_reuse`` a
    name that already holds another run's event files gets the run id appended, so two jobs
    called ``ppo`` do not interleave their curves in one TensorBoard run. Only reads the file
    system: nothing is created here.
    """
    explicit = run.option(DIR_DEST, DIR_ENV)
    if explicit:
        return Path(os.fspath(explicit)).expanduser().absolute()
    base = Path(run.tracking_dir).absolute() / "tensorboard"
    path = base / path_part(run.name or run.run_id, "run name")
    if avoid_reuse and run.name != run.run_id and _has_events(path):
        fallback = base / path_part(f"{run.name}-{run.run_id}", "run name")
        log.info(
            "TensorBoard dir %s already holds another run's events; run %s writes to %s",
            path,
            run.run_id,
            fallback,
        )
        path = fallback
    return path


def target(run: RunContext) -> dict[str, str]:
    """``{"logdir": ...}``: the run's log directory, absolute (:func:`default_logdir`; a new run
    moves aside from another run's events, a resumed one writes on where it was)."""
    return {"logdir": str(default_logdir(run, avoid_reuse=run.primary and not run.resume))}
