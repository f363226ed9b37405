"""Drop-ins for slime's tracking functions, with slime's signatures.

slime (``slime.observability.logging_utils`` since THUDM/slime@624b824a, ``slime.utils.logging_utils``
before) tracks a PPO job with three calls, made from several processes:

* the driver (``train.py``) calls ``init_tracking(args)`` and, at the end, ``finish_tracking(args)``;
* the rollout manager (a Ray actor) calls ``init_tracking(args, primary=False)``, logs
  ``rollout/*``, ``eval/*``, ``perf/*`` with ``log(args, metrics, step_key)`` and calls
  ``finish_tracking(args)`` when it is disposed of;
* each Megatron actor (Ray actors, one gloo/NCCL world per role) calls
  ``init_tracking(args, primary=False, role="actor" | "critic")`` on its main rank and logs
  ``train/*`` with ``step_key="train/step"``; it never calls ``finish_tracking``.

The functions here keep those signatures and that contract, on top of tracking-core:

* ``init_tracking(args)`` (primary) opens the job's run in every selected backend and puts the run
  handle on ``args.tracking_run`` (and ``$TRACKING_CORE_RUN``), the way slime puts
  ``args.wandb_run_id`` there: slime pickles ``args`` into every Ray actor after this call, so each
  of them finds the run. The launch config is ``args`` (unprefixed keys).
* ``init_tracking(args, primary=False, role=...)`` attaches this process as ``role`` (``rollout``
  when no role is given). It may be called on every rank: only the role's writer (the Megatron main
  rank) writes, the others get a no-op. It is never a collective call. The writer logs the role's
  effective config (``actor/lr``, ``critic/lr``; see :mod:`slime_integration.collectors`).
* ``log(args, metrics, step_key)`` logs ``metrics`` under the names slime made
  (``train/pg_loss``, ``train/critic-value_loss``, ``rollout/raw_reward``: no role prefix is
  added) at step ``metrics[step_key]`` on the ``step_key`` axis. The ``step_key`` entry itself is
  the step, not a metric: it is not logged as a series of its own (every backend records it as
  the step of each value, and W&B as the ``define_metric`` axis slime declares).
  It only enqueues: it never blocks and never raises. slime's own timers (``perf/<phase>_time``,
  seconds) also become spans of the role's phase trace (``runs/<id>/trace-<role>.json``),
  ending at the call; slime reduces its metrics itself, so nothing is reduced again.
* ``finish_tracking(args)`` in the primary ends the run (FINISHED, or FAILED when the process is
  failing); in a secondary it delivers what this process logged and detaches, leaving the run
  open for the others. Processes that never call it (slime's training actors) still deliver what
  they logged: their delivery workers run on their own schedule, and the primary's
  ``finish_tracking`` first waits (bounded) until every live writer of the run on its node has
  delivered everything (``tracking_core.delivery.sync.await_peers``); tracking-core also finishes open runs at
  interpreter exit and on SIGTERM. When Ray kills an
  actor too fast even for that, its records are in its journal: ``tracking-core sync`` delivers
  them, each exactly once.

Config keys follow the convention (README, "Key naming convention"): the launch config unprefixed,
written by the primary; ``actor/...``, ``critic/...`` and ``rollout/...`` written by each role's
writer (its effective args: :mod:`slime_integration.collectors`). With the ``slime`` key style the
actor's keys are unprefixed and the critic's under ``critic/``, as slime's own ``wandb_utils``
names them; the rollout manager keeps ``rollout/`` (slime logs it unprefixed too, racing the
driver and the actor for the same keys). The run handle on ``args.tracking_run`` is plumbing, not
config, and is left out of every namespace.

slime's flags keep their meaning: ``--use-wandb`` / ``--use-tensorboard`` (and the proposed
``--use-mlflow``) select backends when ``--tracking-backends`` does not
(:mod:`slime_integration.options`), and with none of them (nor ``$TRACKING_CORE_BACKENDS``)
nothing is tracked, as in slime, with one warning saying how to turn tracking on;
``--wandb-group`` / ``--disable-wandb-random-suffix`` name the W&B group and run as slime does
(:func:`wandb_naming`); ``--wandb-key`` is exported as
``WANDB_API_KEY`` in this process to log in and is never logged (the config pipeline redacts it,
also on the command line W&B records); ``--wandb-run-id`` resumes: the saved run whose W&B run id
(or run id) it names is re-attached, steps continuing; when none is saved, a run with that id is
started (W&B resumes its run id itself). ``--mlflow-run-id`` (proposed for slime) likewise: the
saved run whose MLflow run id (or run id) it names is re-attached, and its MLflow run continues.
``--tb-project-name`` / ``--tb-experiment-name`` name the
TensorBoard directory as slime does (``tensorboard_log/<project>/<experiment>``) unless
``--tensorboard-dir`` or ``$TENSORBOARD_DIR`` does.

Code that calls ``wandb.log`` itself (slime's rollout-buffer example, custom rollout log functions)
finds no ``wandb.run`` in this process: W&B's client runs beside the writer. Where W&B is selected,
such a call is forwarded to this process's run with one warning
(:mod:`slime_integration.wandb_bridge`); :func:`current_run` is the documented way to log beside
slime's ``log``.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import secrets
import string
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tracking_core
from tracking_core import NullRun, Run
from tracking_core.host_api import (
    ARGS_ATTR,
    HANDLE_FILE,
    RUN_ENV,
    find_handle,
    job_run_id,
    path_part,
    path_under,
    trace_span,
    tracking_dir,
)

from . import collectors as _collectors
from . import options as _options
from . import wandb_bridge as _wandb_bridge

logger = logging.getLogger("tracking_core.slime")

#: The role of a secondary that names none: slime's rollout manager.
DEFAULT_SECONDARY_ROLE = "rollout"
#: Plugin names under which the adapter registers its hook implementations.
PLUGIN_NAMES = {"slime-switches": _options, "slime-role-config": _collectors}
#: How long replacing or resetting a run waits for its backends.
DETACH_TIMEOUT = 10.0

_RUN_ID_OK = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
#: slime's own timers as it logs them (``perf/actor_train_time``): each a phase of the trace.
_PERF_TIME = re.compile(r"perf/(.+)_time")
#: The characters of slime's random W&B group suffix (``wandb.util.generate_id``: base 36).
_ID_CHARS = string.ascii_lowercase + string.digits

AnyRun = Run | NullRun


class _Entry:
    __slots__ = ("run", "role", "primary", "args_ref", "args_id")

    def __init__(self, run: AnyRun, role: str | None, primary: bool, args: Any) -> None:
        self.run = run
        self.role = role
        self.primary = primary
        self.args_id = id(args)
        try:
            self.args_ref: Any = weakref.ref(args)
        except TypeError:
            self.args_ref = None

    def owns(self, args: Any) -> bool:
        return self.args_ref is not None and self.args_id == id(args) and self.args_ref() is args


_lock = threading.RLock()
#: This process's runs by role (None: the primary), newest last.
_entries: dict[str | None, _Entry] = {}
_warned: set[str] = set()


def _warn_once(key: str, message: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args)


# -- plugins -------------------------------------------------------------------------------------
def register_plugins() -> None:
    """Register the adapter's hook implementations (slime's switches, the role-config collector)
    with this process's plugin manager; idempotent, and redone after a plugin manager reset.
    The adapter's own flags become tracking options of this process, kept out of the roles'
    params (:func:`slime_integration.collectors.declare_adapter_options`)."""
    manager = tracking_core.get_plugin_manager()
    for name, plugin in PLUGIN_NAMES.items():
        if manager.pm.get_plugin(name) is None and not manager.pm.is_registered(plugin):
            manager.register(plugin, name)
    _collectors.declare_adapter_options()


def unregister_plugins() -> None:
    """Remove what :func:`register_plugins` added (tests; a process leaving slime behind)."""
    manager = tracking_core.get_plugin_manager()
    for name in PLUGIN_NAMES:
        manager.unregister(name)


# -- slime's flags ---------------------------------------------------------------------------------
def _export_wandb_key(args: Any) -> None:
    """``--wandb-key`` logs in: W&B reads ``WANDB_API_KEY``. The key stays out of every config
    (the pipeline redacts ``wandb_key`` and ``--wandb-key`` on command lines)."""
    key = getattr(args, "wandb_key", None)
    if key:
        os.environ["WANDB_API_KEY"] = str(key)


def _tensorboard_options(args: Any) -> dict[str, Any]:
    """slime's TensorBoard naming: ``tensorboard_log/<project>/<experiment>`` when
    ``--tb-project-name`` is given and neither ``--tensorboard-dir`` nor ``$TENSORBOARD_DIR`` is."""
    project = getattr(args, "tb_project_name", None)
    if not project or getattr(args, "tensorboard_dir", None) or os.environ.get("TENSORBOARD_DIR"):
        return {}
    experiment = getattr(args, "tb_experiment_name", None) or datetime.datetime.now().strftime(
        "%Y%m%d_%H%M%S"
    )
    # The names stay inside tensorboard_log/ whatever they hold (tracking_core.names).
    where = Path("tensorboard_log", path_under(project, "project name"), path_under(experiment, "experiment name"))
    return {"tensorboard_dir": str(where.absolute())}


def _saved_handle_for(run_id: str, tracking_dir: str, backend: str = "wandb") -> Path | None:
    """The saved handle of the run ``--wandb-run-id`` (``backend="wandb"``) or ``--mlflow-run-id``
    (``"mlflow"``) names: a run with that id, else a run whose entry for ``backend`` has that id
    (a run started with ``--wandb-run-id`` keeps its own run id; MLflow makes its own run ids)."""
    runs = Path(tracking_dir) / "runs"
    direct = runs / path_part(run_id, warn=False) / HANDLE_FILE
    if direct.is_file():
        return direct
    if not runs.is_dir():
        return None
    matches = []
    for path in runs.glob(f"*/{HANDLE_FILE}"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        entry = (data.get("backends") or {}).get(backend) or {}
        if run_id in (entry.get("id"), entry.get("run_id")):
            matches.append(path)
    return max(matches, key=lambda p: p.stat().st_mtime) if matches else None


def _resume_plan(args: Any) -> tuple[Path | None, str | None]:
    """(saved handle to resume, run id for a new run) from ``--wandb-run-id``, else from
    ``--mlflow-run-id`` (:func:`slime_integration.options.resume_ids`)."""
    asked = _options.resume_ids(args)
    for backend, run_id in asked:
        saved = _saved_handle_for(run_id, tracking_dir(args), backend)
        if saved is not None:
            return saved, None
    for backend, run_id in asked:
        if _RUN_ID_OK.fullmatch(run_id):
            if backend == "mlflow":
                logger.warning(
                    "--mlflow-run-id %s: no run saved in %s delivered to that MLflow run; starting run %s, "
                    "which continues the MLflow run tagged tracking_core.run_id=%s if the experiment has "
                    "one, else creates a new MLflow run",
                    run_id, tracking_dir(args), run_id, run_id,
                )
            return None, run_id
    return None, None


# -- the registry of this process's runs -----------------------------------------------------------
def _remember(run: AnyRun, role: str | None, primary: bool, args: Any) -> None:
    with _lock:
        old = _entries.pop(role, None)
        _entries[role] = _Entry(run, role, primary, args)
    if old is not None and old.run is not run:
        old.run.finish(timeout=DETACH_TIMEOUT)


def _entry_for(args: Any) -> _Entry | None:
    """The run ``args`` was initialised with; else, when this process has exactly one, that one
    (slime may hand a copy of ``args`` around inside one process)."""
    with _lock:
        entries = list(_entries.values())
    for entry in entries:
        if entry.owns(args):
            return entry
    if len(entries) == 1:
        return entries[0]
    return None


def current_run(args: Any = None) -> AnyRun | None:
    """The tracking-core run this process logs to, for code that logs beside slime's ``log``.

    With ``args``: the run ``args`` was initialised with (see :func:`log`). Without: this
    process's run, the one opened or attached last when there are several (in slime each Ray
    actor has one: the rollout manager's, a training rank's). None when this process has none
    (tracking is off, or ``init_tracking`` was not called here). Log with the run's
    ``log_metrics(metrics, step=..., step_key=...)``, ``log_table``, ``log_text``, ...; on a
    non-writer rank they do nothing.
    """
    if args is None:
        with _lock:
            newest = next(reversed(_entries.values()), None)
        return newest.run if newest is not None else None
    entry = _entry_for(args)
    return entry.run if entry is not None else None


# -- the drop-ins -------------------------------------------------------------------------------
def init_tracking(args: Any, primary: bool = True, **kwargs: Any) -> AnyRun | None:
    """slime's ``init_tracking``: open the job's run (primary) or attach this process to it.

    ``role=`` names a secondary's role (``actor``, ``critic``; default ``rollout``). Returns the
    run (a no-op run on a non-writer rank), or None when a secondary finds no run to attach to.
    The primary raises when the tracking configuration is wrong (an unknown backend, say), so the
    job stops before training starts; a secondary never raises.

    Like slime, it tracks nothing unless asked: without ``--tracking-backends``,
    ``$TRACKING_CORE_BACKENDS``, ``--use-wandb``, ``--use-tensorboard`` or ``--use-mlflow``
    the primary says so in one warning and returns None, and secondaries and :func:`log` stay
    silent. (A plain ``tracking_core.start_run`` still falls back to the embedded default.)
    """
    role = kwargs.pop("role", None)
    if kwargs:
        _warn_once(
            "kwargs:" + ",".join(sorted(kwargs)),
            "init_tracking ignores argument(s) %s (slime's tracking takes only role=)",
            ", ".join(sorted(kwargs)),
        )
    _export_wandb_key(args)
    register_plugins()
    if primary:
        return _init_primary(args)
    return _init_secondary(args, role or DEFAULT_SECONDARY_ROLE)


def launch_config(args: Any) -> Any:
    """What the primary logs as the launch config: ``args`` without the adapter's plumbing
    (``tracking_run``: the run handle is not part of what the job was started with)."""
    try:
        values = dict(vars(args))
    except TypeError:
        return args
    for key in _collectors.NOT_CONFIG:
        values.pop(key, None)
    return values


def _say_tracking_is_off() -> None:
    _warn_once(
        "off",
        "slime tracking is off: none of --tracking-backends, $TRACKING_CORE_BACKENDS, "
        "--use-wandb, --use-tensorboard or --use-mlflow is given, so this job logs nothing "
        "(as slime does). Turn it on with e.g. --tracking-backends mlflow (a local MLflow store "
        "under --tracking-dir, default ./tracking-runs), --use-wandb or --use-tensorboard",
    )


def _random_suffix() -> str:
    """What slime's suffix is (``wandb.util.generate_id()``, ``wandb.sdk.lib.runid`` in newer
    wandb): 8 random base-36 characters. Drawn here so that choosing a name imports no wandb."""
    return "".join(secrets.choice(_ID_CHARS) for _ in range(8))


def wandb_naming(args: Any) -> dict[str, Any]:
    """slime's W&B group and run name (``slime.observability.wandb_utils.init_wandb_primary``),
    as options for the ``wandb`` backend; empty when neither ``--wandb-group`` nor
    ``--wandb-exp-name`` is given.

    With slime's random suffix (the default; off with ``--disable-wandb-random-suffix``) the
    group is ``<group>_<id>`` and the run ``<group>_<id>-RANK_<rank>`` (the driver's rank, 0);
    without it both are ``<group>``. Megatron's ``--wandb-exp-name``, which slime never reads,
    names the run when it is given. Without a group, slime's own init fails (with the suffix)
    or leaves the run unnamed; here the run keeps the W&B backend's default naming.
    """
    group = getattr(args, "wandb_group", None)
    exp_name = getattr(args, "wandb_exp_name", None) or None
    out: dict[str, Any] = {}
    if group:
        if getattr(args, "wandb_random_suffix", True):
            group = f"{group}_{_random_suffix()}"
            name = f"{group}-RANK_{getattr(args, 'rank', 0) or 0}"
        else:
            name = str(group)
        # the suffix is drawn here, once: the backend must not add another
        out = {"wandb_group": str(group), "wandb_name": name, "wandb_random_suffix": False}
    if exp_name:
        out["wandb_name"] = str(exp_name)
    return out


def _start_options(args: Any) -> dict[str, Any]:
    """Options the adapter adds for the backends: slime's TensorBoard directory, slime's W&B
    group and run name, and the proposed ``--mlflow-experiment-name`` as the MLflow backend's
    ``--mlflow-experiment``."""
    out = _tensorboard_options(args)
    out.update(wandb_naming(args))
    experiment = getattr(args, "mlflow_experiment_name", None)
    if experiment and not getattr(args, "mlflow_experiment", None):
        out["mlflow_experiment"] = str(experiment)
    return out


def _bridge_wandb(run: AnyRun) -> None:
    """Where W&B is selected, a direct ``wandb.log`` in this process reaches the run
    (:mod:`slime_integration.wandb_bridge`)."""
    handle = getattr(run, "handle", None)
    if handle is not None and "wandb" in (handle.backends or {}):
        _wandb_bridge.install()


def _init_primary(args: Any) -> Run | None:
    with _lock:
        existing = _entries.get(None)
    if existing is not None and existing.owns(args) and existing.run.finished is None:
        return existing.run  # type: ignore[return-value]
    if not _options.tracking_requested(args):
        _say_tracking_is_off()
        return None
    saved, run_id = _resume_plan(args)
    with _collectors.collecting():
        run = tracking_core.start_run(
            args=args,
            config=launch_config(args),
            handle=saved,
            run_id=run_id,
            options=_start_options(args) or None,
        )
    wandb_entry = run.handle.backends.get("wandb")
    if wandb_entry and wandb_entry.get("id"):
        # slime keeps the W&B run id on args for the rest of the job, as its own init does.
        try:
            args.wandb_run_id = wandb_entry["id"]
        except (AttributeError, TypeError):
            pass
    _remember(run, None, True, args)
    _bridge_wandb(run)
    return run


def _init_secondary(args: Any, role: str) -> AnyRun | None:
    with _lock:
        existing = _entries.get(role)
    try:
        handle = find_handle(None, args)
    except ValueError as exc:
        logger.error("%s: the run handle on args.%s / $%s is unusable (%s); not tracking", role,
                  ARGS_ATTR, RUN_ENV, exc)
        return None
    job = job_run_id() if handle is None else None
    if handle is None and (job is None or not _options.tracking_requested(args)):
        if not _options.tracking_requested(args):
            logger.debug("init_tracking(primary=False, role=%r): tracking is off", role)
            return None
        _warn_once(
            "nohandle:" + role,
            "init_tracking(primary=False, role=%r): no run to attach to (args.%s and $%s are "
            "unset, and no job id names the run: did the driver call init_tracking(args) "
            "before creating this actor?); this process logs nothing",
            role,
            ARGS_ATTR,
            RUN_ENV,
        )
        return None
    run_id = handle.run_id if handle is not None else job[0] if job is not None else None
    if (
        existing is not None
        and existing.run.finished is None
        and existing.run.handle is not None
        and existing.run.handle.run_id == run_id
    ):
        existing.args_ref = weakref.ref(args) if hasattr(args, "__weakref__") else None
        existing.args_id = id(args)
        return existing.run
    try:
        with _collectors.collecting():
            run = tracking_core.attach(handle, role=role, args=args, metric_prefix="")
    except Exception:  # noqa: BLE001 - tracking must never stop a training actor
        logger.exception("role %r could not attach to run %s; this process logs nothing", role,
                      run_id)
        return None
    _remember(run, role, False, args)
    _bridge_wandb(run)
    return run


def _step_of(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    item = getattr(value, "item", None)
    if item is not None:
        try:
            value = item()
        except Exception:  # noqa: BLE001 - not a scalar
            return None
    try:
        step = int(value)
    except (TypeError, ValueError):
        return None
    return step if step == value else None


def log(args: Any, metrics: Mapping[str, Any], step_key: str) -> None:
    """slime's ``log``: ``metrics`` at step ``metrics[step_key]`` on the ``step_key`` axis.

    Names pass through as slime made them; the ``step_key`` entry is the step and is not logged
    as a metric of its own. Never blocks, never raises; a no-op where this process has no run
    (a non-writer rank) or ``args`` belongs to no run of this process.
    """
    try:
        entry = _entry_for(args)
        if entry is None:
            if not _options.tracking_requested(args):
                return  # tracking is off, as in slime: nothing to say per call
            _warn_once(
                "nolog",
                "log(): this process has no tracking run (init_tracking was not called here); "
                "metrics such as %s are not logged",
                next(iter(metrics), "?"),
            )
            return
        if not entry.run.is_writer:
            return
        raw_step = metrics.get(step_key)
        step = _step_of(raw_step)
        if raw_step is not None and step is None:
            _warn_once(
                "step:" + step_key,
                "log(): the step %r=%r is not an integer; these metrics are logged without a step",
                step_key,
                raw_step,
            )
        elif raw_step is None:
            _warn_once(
                "nostep:" + step_key,
                "log(): metrics logged with step_key=%r do not contain it; they are logged "
                "without a step",
                step_key,
            )
        values = {key: value for key, value in metrics.items() if key != step_key}
        entry.run.log_metrics(values, step=step, step_key=step_key)
        if step is not None:  # slime's timers: spans of the role's phase trace, ending now
            for key, value in values.items():
                timed = _PERF_TIME.fullmatch(key)
                if timed and isinstance(value, (int, float)) and 0 <= value < float("inf"):
                    trace_span(entry.run, timed.group(1), float(value), step, step_key)
    except Exception:  # noqa: BLE001 - logging must never stop training
        if "logfail" not in _warned:
            _warned.add("logfail")
            logger.warning("log() failed; training goes on", exc_info=True)


def finish_tracking(args: Any) -> None:
    """slime's ``finish_tracking``: the primary ends the run (once the training actors' last
    records arrived: see ``tracking_core.delivery.sync.await_peers``); a secondary delivers what this process
    logged and detaches, leaving the run open for the others. Never raises."""
    entry = _entry_for(args)
    if entry is None:
        return
    with _lock:
        if _entries.get(entry.role) is entry:
            del _entries[entry.role]
    try:
        entry.run.finish()
    except Exception:  # noqa: BLE001
        logger.exception("finish_tracking failed for %s", entry.role or "the primary")


def reset(timeout: float = DETACH_TIMEOUT) -> None:
    """Finish every run the drop-ins opened or attached in this process and forget them.

    For tests, and for a process that leaves slime behind; finish_tracking is the normal end.
    """
    with _lock:
        entries = list(_entries.values())
        _entries.clear()
    for entry in entries:
        try:
            entry.run.finish(timeout=timeout)
        except Exception:  # noqa: BLE001
            logger.exception("could not finish %s", entry.role or "the primary")
    _warned.clear()
    _wandb_bridge.uninstall()
