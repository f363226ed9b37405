"""Runs: the primary opens the job's run, secondaries attach to it with a role.

>>> run = tracking_core.start_run(config=args)           # the driver
>>> child = tracking_core.attach(role="actor")            # a worker, handle from $TRACKING_CORE_RUN
>>> child.log_metrics({"loss": 0.1}, step=3, step_key="train/step")
>>> run.finish()

Neither call waits for a tracker: each backend's target (where its run goes) is known at once,
and the backends open in the writer's delivery process (:mod:`tracking_core.delivery`). A
non-writer rank gets a :class:`NullRun` whose methods do nothing. A process that exits without
calling ``finish`` still delivers what it logged (see :mod:`tracking_core.lifecycle`). Nothing
here raises into the training loop once a run exists: faults are logged and counted.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import EllipsisType
from typing import Any

from . import lifecycle, reduce, report, settings
from . import options as opts
from .attendance import READ_BOUND, announce, take_roll, unwritten_roles
from .collectors import merge_collected
from .config import classify_name, redact, to_plain
from .context import RunContext
from .delivery import kinds, snapshot
from .delivery.intake import Intake, spill_folder
from .delivery.journal import JOURNAL_DIR, JournalUnavailable, JournalWriter
from .delivery.modes import delivery_mode, start_delivery
from .delivery.plan import BackendPlan, Plan, context_to_dict, plain
from .delivery.stream import Delivery
from .errors import WarnOnce
from .files import replace_text
from .handle import (
    ARGS_ATTR,
    HANDLE_FILE,
    RUN_ENV,
    RunHandle,
    find_handle_source,
    local_tracking_dir,
    local_tracking_dir_source,
    run_folder,
)
from .launchers import JOB_ID_SOURCES, job_run_id
from .names import path_part
from .plugins import PluginManager, get_plugin_manager
from .records import ConfigSection, RunStatus
from .registry import BackendSpec
from .selection import resolve_backend_names
from .summary import ENDS_DIR, FinishSummary, save_end
from .system_metrics import end_sampling, start_sampler  # neither raises
from .writer import SYSTEM_ROLE, decide_writer

log = logging.getLogger("tracking_core.runs")
#: The kinds the log_* methods queue (bound here: log_metrics looks its kind up once per call).
_METRIC, _TABLE, _HISTOGRAM, _TEXT = kinds.METRIC, kinds.TABLE, kinds.HISTOGRAM, kinds.TEXT
#: The clock of log_metrics, bound once (a module attribute looked up at every call costs it).
_now = time.time
_REDUCERS = reduce.Reducer  # its ``made``: one attribute read until a reducer exists

DEFAULT_FINISH_TIMEOUT = 30.0
#: The longest timeout taken as given (a year): a thread cannot wait much longer (``inf`` raises).
MAX_TIMEOUT = 365 * 86400.0
#: How long a finishing primary waits, at most, for the other writers of the run on its node.
PEER_TIMEOUT = 10.0
#: How long a finishing primary gives, at most, the system metrics of its process to end.
SYSTEM_TIMEOUT = 5.0
#: Job ids this process has started a run of (see :func:`_job_or_new_id`).
_JOB_IDS_TAKEN: set[str] = set()
_JOB_IDS_LOCK = threading.Lock()


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(3).hex()


def _dir_advice(source: str, primary: bool) -> str:
    """What makes a process write elsewhere, given what chose its tracking directory."""
    if source == "tracking_dir=":
        return "pass tracking_dir= a writable directory"
    if source == "--tracking-dir" and primary:  # a primary's --tracking-dir wins over the variable
        return "point --tracking-dir at a writable directory"
    return f"set ${settings.DIR} in this process to a writable directory"


def _options_of(args: Any, extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """The host's parsed options as plain data (a cyclic or unprintable value cannot reach a
    backend, a pipe or a file)."""
    out: dict[str, Any] = {}
    if isinstance(args, Mapping):
        out.update(args)
    elif args is not None:
        try:
            out.update(vars(args))
        except TypeError:
            pass
    if extra:
        out.update(extra)
    try:
        return dict(to_plain(out)[0])
    except Exception:  # noqa: BLE001 - the pipeline never raises; this is a last guard
        return {k: v for k, v in out.items() if isinstance(v, (str, int, float, bool))}


def replay_options(options: Mapping[str, Any], backends: Sequence[str]) -> dict[str, Any]:
    """The backend options ``tracking-core sync`` needs to reach the same trackers: each
    backend's own plain-valued options (``mlflow_tracking_uri``), never a credential."""
    return {
        key: value
        for key, value in options.items()
        if any(key.startswith(f"{name}_") for name in backends)
        and isinstance(value, (str, int, float, bool))
        and classify_name(key) is None
    }


@dataclasses.dataclass
class RunSetup:
    """How one process writes to a run, as :func:`start_run` or :func:`attach` decided it.
    ``role`` is None for the primary, which opens each backend its handle has not opened yet
    (a role's writer attaches); ``tracking_dir`` is this process's own, with what chose it."""

    role: str | None
    rank: int | None
    prefix: str
    specs: Sequence[BackendSpec]
    manager: PluginManager
    options: Mapping[str, Any]
    tracking_dir: tuple[Path, str]
    args: Any
    flush_interval: float
    delivery: str | None
    tags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    resume: bool = False


class Run:
    """A run as seen from one writing process: the primary's or a role's writer's."""

    is_writer = True
    #: the torch.distributed group of the role's ranks (attach(group=)) and the role's
    #: reduction, made at the first reduced value or timer (:mod:`tracking_core.reduce`)
    group: Any = None
    _gatherer: reduce.Gatherer | None = None

    def __init__(self, handle: RunHandle, setup: RunSetup) -> None:
        self.handle = handle
        self.role = role = setup.role
        self.primary = primary = role is None
        # This process's own directory (and what chose it): the handle's is the primary's.
        self.tracking_dir, self._dir_source = setup.tracking_dir
        self.args = setup.args
        self.metric_prefix = setup.prefix
        specs, rank = setup.specs, setup.rank
        # The journal folder's and the writer's run folders' name: the role as a file name.
        who = "primary" if primary else f"{path_part(role, 'role')}-r{rank if rank is not None else 0}"
        if role == SYSTEM_ROLE:  # one per node: the host tells them apart (pids repeat in containers)
            who = f"{SYSTEM_ROLE}-{path_part(socket.gethostname(), 'host name')}"
        self.label = f"{who}-p{os.getpid()}"
        self.exit_timeout = settings.exit_timeout()
        self.finished: FinishSummary | None = None
        self._names = [s.name for s in specs]
        self._pid = os.getpid()
        self._state: str | None = None  # "finishing", "finished" or "forked": every call is then a no-op
        self._warn_once = WarnOnce(log)
        self._lock = threading.Lock()
        self._handle_lock = threading.RLock()  # save_handle takes it too
        self._local_unusable = False  # said once: later local writes fail quietly
        self._saved_configs: dict[Path, str] = {}
        writer, spill = self._open_journal(setup.options) if specs else (None, None)
        self.journal = writer.folder if writer is not None else None
        self._writer = writer
        self._intake = Intake(
            writer, setup.prefix, setup.flush_interval, str(self.journal or self._journal_root()), run_id=handle.run_id, spill=spill
        )
        self._append = self._intake.items.append
        self._queued = self._intake.items  # past its bound, a logging call journals (relieve)
        self._delivery: Delivery | None = None
        if specs:
            mode = delivery_mode(setup.delivery or getattr(setup.args, "tracking_delivery", None), specs, setup.manager)
            self._delivery = start_delivery(mode, self._plan(setup), setup.manager, self._opened)
        self._intake.start(self._delivery)
        lifecycle.register(self)

    @property
    def run_id(self) -> str:
        return self.handle.run_id

    @property
    def run_dir(self) -> Path:
        """This process's run folder, ``<tracking_dir>/runs/<run id>``: its saved configs, its
        delivery logs, and (the primary's) the run handle."""
        return run_folder(self.tracking_dir, self.handle.run_id)

    def _plan(self, setup: RunSetup) -> Plan:
        """What this writer's follower needs, as plain data (it may cross to another process):
        a primary opens each backend its handle has not opened yet; the rest attach."""
        handle = self.handle
        local = handle.rebased(self.tracking_dir)  # the targets' paths as this process's
        context = RunContext(
            backend="",
            run_id=handle.run_id,
            name=handle.name,
            primary=self.primary,
            tracking_dir=self.tracking_dir,
            role=self.role,
            label=self.label,
            rank=setup.rank,
            options=setup.options,
            tags=dict(setup.tags),
            resume=setup.resume,
        )
        backends = []
        for spec in setup.specs:
            pending = spec.name in handle.pending
            opens = self.primary and (pending or spec.name not in handle.backends)
            entry = dict(local.backends.get(spec.name) or {})
            ctx = context_to_dict(dataclasses.replace(context, backend=spec.name))
            backends.append(BackendPlan(spec.name, ctx, "open" if opens else "attach", entry, pending=pending))
        return Plan(
            folder=str(self.journal) if self.journal is not None else None,
            prefix=self.metric_prefix,
            backends=backends,
            poll=setup.flush_interval,
            exit_timeout=self.exit_timeout,
            handle_file=str(self.run_dir / HANDLE_FILE),
            terminal=any(spec.terminal for spec in setup.specs),
        )

    @property
    def backends(self) -> list[str]:
        return list(self._names)

    # -- setting up -------------------------------------------------------------------------
    def _journal_root(self) -> Path:
        return self.tracking_dir / JOURNAL_DIR / path_part(self.handle.run_id, "run id")

    def _open_journal(self, options: Mapping[str, Any]) -> tuple[JournalWriter | None, Callable[[], JournalWriter] | None]:
        """The writer's journal in the tracking directory, and how to open its spill journal
        should the journal fail later. Where the tracking directory cannot be written, the
        journal goes to the spill location itself (see :mod:`tracking_core.delivery.intake`),
        and where that fails too, there is none: records go from memory."""
        folder = self._journal_root() / self.label
        spill = spill_folder(folder.parent.name, self.label)
        meta = {
            "created": time.time(),
            "handle": dataclasses.asdict(self.handle),
            "tracking_dir": str(self.tracking_dir),  # this writer's own (the handle's: the primary's)
            "primary": self.primary,
            "role": self.role,
            "prefix": self.metric_prefix,
            "label": self.label,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "backends": self._names,
            "options": replay_options(options, self._names),
        }
        size = settings.segment_bytes()
        writer: JournalWriter | None
        try:
            writer = JournalWriter(folder, {**meta, "spill": str(spill)}, size, on_recreated=self._save_again)
        except JournalUnavailable as exc:
            failure = exc
        else:
            return writer, lambda: JournalWriter(spill, {**meta, "spill_of": str(folder)}, size)
        self._local_unusable = True
        try:
            writer = JournalWriter(spill, meta, size)
        except JournalUnavailable:
            writer = None
            instead = "records go to the trackers from memory only, and a crash or a tracker that stays down loses them"
        else:
            instead = f"its journal is kept in {spill} instead (after a crash: `tracking-core sync {spill.parents[2]}`)"
        log.warning(
            "tracking-core cannot write in its tracking directory %s (%s; chosen by %s): no run "
            "handle or config files there, and %s; %s",
            self.tracking_dir,
            failure.strerror or failure,
            self._dir_source,
            instead,
            _dir_advice(self._dir_source, self.primary),
        )
        return writer, None

    def _opened(self, name: str, result: Any) -> None:
        """A backend opened the run (its delivery said so): the handle records where."""
        if not self.primary or result is None:
            return
        with self._handle_lock:
            self.handle.backends[name] = plain(dict(result))
            if name in self.handle.pending:
                self.handle.pending.remove(name)
            self.save_handle()

    # -- config --------------------------------------------------------------------------------
    def log_config(
        self,
        config: Any,
        role: str | None | EllipsisType = ...,
        report: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> ConfigSection | None:
        """Log ``config`` (any host object) as the launch config (``role=None``) or a role's.

        By default a primary logs the launch config and a secondary its own role's. The config
        is converted, redacted and keyed (see the README's key convention; the tracking options
        leave every role's params for the launch config's ``tracking/`` group, and null values
        are no params: :func:`tracking_core.config.job_params`), saved as JSON in the
        run directory, journaled and delivered to every backend. ``report`` adds entries to the
        section's report (collector conflicts, say). ``namespace`` names a further namespace
        of the role (its own JSON artifact, e.g. ``actor-ranks``) instead of the role's own.
        Returns the section that was logged (None when nothing was: a finished run, a forked
        process, or a config the pipeline could not read, with a warning).
        """
        if not self._usable("log_config"):
            return None
        try:
            section = self._section(config, self.role if isinstance(role, EllipsisType) else role, report, namespace)
        except Exception as exc:  # noqa: BLE001 - never raise into the training loop
            log.warning("tracking-core could not log a config (%s: %s); training goes on", type(exc).__name__, exc, exc_info=True)
            return None
        self._intake.config(section)
        return section

    def _section(self, config: Any, role: str | None, report: Mapping[str, Any] | None, namespace: str | None) -> ConfigSection:
        from .config import build_section, job_params

        section = _without_handle(build_section(config, role, self.handle.key_style))
        section = job_params(section, opts.tracking_option_dests())
        if report:
            section = dataclasses.replace(section, report={**section.report, **plain(dict(report))})
        if namespace:
            section = dataclasses.replace(section, namespace=namespace)
        self._save_config(section)
        return section

    def _save_config(self, section: ConfigSection) -> None:
        from .config import artifact_path

        path = self.run_dir / artifact_path(section)
        self._saved_configs[path] = text = section.json  # saved again should a cleaner delete them
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            replace_text(path, text)
        except OSError as exc:
            self._local_failed("save-config", "could not save config %s (%s); the trackers still receive it", path, exc)

    def save_handle(self) -> Path | None:
        """Save the run handle in the run directory (for resume and sync); None if it cannot.

        The primary saves the handle. Another writer saves only where no handle is (its own
        tracking directory, or the primary's after a cleaner deleted it): there, in its own
        directory, the run as this node sees it (:meth:`local_handle`), for ``show`` and
        ``sync`` on this node; it never replaces the primary's."""
        try:
            with self._handle_lock:  # the delivery's thread saves it too, as backends open
                if self.primary:
                    return self.handle.save()
                return self.local_handle().save(if_absent=True)
        except OSError as exc:
            self._local_failed("save-handle", "could not save the run handle in %s (%s); resume and sync need it", self.run_dir, exc)
            return None

    def local_handle(self) -> RunHandle:
        """The handle as this process sees it: the same run and targets, with this process's
        tracking directory (and host) in place of the primary's, and the targets' paths under
        it; the handle itself where this process writes in the primary's directory."""
        if os.path.normpath(self.tracking_dir) == os.path.normpath(self.handle.tracking_dir):
            return self.handle
        return dataclasses.replace(
            self.handle.rebased(self.tracking_dir), tracking_dir=str(self.tracking_dir), host=socket.gethostname()
        )

    def _save_again(self) -> None:
        """The journal was deleted under the run (a cleaner): the run handle and the saved
        configs most likely went with it, and resume and sync need them; saved again, quietly."""
        self.save_handle()
        for path, text in list(self._saved_configs.items()):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                replace_text(path, text)
            except OSError:
                pass

    def _local_failed(self, kind: str, msg: str, *args: Any) -> None:
        if self._local_unusable:
            log.debug(msg, *args)  # the tracking directory's warning said it already
        else:
            self._warn_once(kind, msg, *args)

    # -- metrics -------------------------------------------------------------------------------
    def log_metrics(
        self,
        metrics: Mapping[str, Any],
        step: int | None = None,
        step_key: str | None = None,
    ) -> None:
        """Queue ``metrics`` at ``step`` on the ``step_key`` axis (``train/step``); never blocks.

        Names become ``<role>/<key>`` unless the run's ``metric_prefix`` says otherwise. Values
        are converted to float in the background (Python, numpy or torch scalars); a value that
        is not a number is skipped and counted in the finish summary.
        """
        if self._state is not None:
            self._usable("log_metrics")
            return
        if _REDUCERS.made and reduce.take(self, metrics, step, step_key):  # across the role's ranks
            return
        try:
            self._append((_METRIC, _now(), dict(metrics), step, step_key))
        except Exception as exc:  # noqa: BLE001 - a lazy view may raise anything while it is read
            self._warn_once(
                "metrics",
                "log_metrics needs a mapping of name to number; reading the %s raised %s: %s; "
                "nothing logged (later calls that fail so are not told again)",
                type(metrics).__name__,
                type(exc).__name__,
                exc,
            )
        if len(self._queued) > self._intake.bound:  # logging outpaces the pump: journal here
            self._intake.relieve()

    def timer(self, phase: str, *, step: int, step_key: str | None = None) -> Any:
        """``with run.timer("rollout", step=step):`` times this rank's phase; the writer logs
        ``perf/<phase>/{max,mean,min,slowest_rank}`` over the role's ranks, and their spans as
        a trace file (:mod:`tracking_core.reduce`)."""
        return reduce.timer(self, phase, step, step_key)

    def _queue(self, item: tuple[Any, ...]) -> None:
        """Queue an item for the pump; past the intake's bound, journal on this thread."""
        self._append(item)
        if len(self._queued) > self._intake.bound:
            self._intake.relieve()

    # -- the rich kinds ------------------------------------------------------------------------
    def log_table(self, key: str, rows: Any, *, step: int | None = None, step_key: str | None = None) -> None:
        """Queue a table at ``step`` (rollout samples): ``rows`` a sequence of mappings (column
        -> str, number, bool or None; other cells become their ``str``) or a pandas
        DataFrame. Each row is copied here (tens of microseconds for 64 rows); the
        conversion and the redaction of secret-shaped strings happen in the background. Never
        blocks, never raises."""
        self._hold_and_queue("log_table", kinds.hold_rows, "a sequence of mappings or a DataFrame", _TABLE, key, rows, step, step_key)

    def log_histogram(
        self, key: str, values: Any, *, step: int | None = None, step_key: str | None = None, bins: int = kinds.DEFAULT_BINS
    ) -> None:
        """Queue the distribution of ``values`` (a sequence, numpy array or tensor of numbers)
        at ``step``; the values are copied here and binned in the background (``bins`` bins
        over their range, plus their exact count, min, max, mean and percentiles)."""
        needs = "a sequence, array or tensor of numbers"
        self._hold_and_queue("log_histogram", kinds.hold_values, needs, _HISTOGRAM, key, values, step, step_key, bins)

    def _hold_and_queue(self, what: str, hold: Callable[[Any], Any], needs: str, kind: kinds.Kind, key: str, value: Any, *rest: Any) -> None:
        """Queue ``(kind, time, key, hold(value), *rest)``: the value copied here by ``hold``;
        a value it cannot copy (not what ``what`` needs) is warned about once, never raised."""
        if self._state is not None:
            self._usable(what)
            return
        try:
            held = hold(value)
        except Exception as exc:  # noqa: BLE001 - bad input is reported, never raised
            self._warn_once(what, "%s(%r) needs %s (%s: %s); nothing logged", what, key, needs, type(exc).__name__, exc)
            return
        self._queue((kind, time.time(), key, held, *rest))

    def log_text(self, key: str, text: str, *, step: int | None = None, step_key: str | None = None) -> None:
        """Queue a text at ``step`` (secret-shaped strings redacted in the background)."""
        if self._state is not None:
            self._usable("log_text")
            return
        self._queue((_TEXT, time.time(), key, text, step, step_key))

    def log_artifact(self, path: str | os.PathLike[str], *, name: str | None = None, kind: str = "artifact") -> None:
        """Queue a file or a directory (a checkpoint, a samples dump, a plot) as it is now.

        Returns in about a millisecond whatever its size: the file (each file of a directory)
        is opened here, and a snapshot taken from that in the background, so deleting or
        replacing it right after does not change what is delivered; rewriting it in place
        before the snapshot does (see docs/records.md). ``name`` defaults to the file's name;
        ``kind`` says what it is (``model``, ``checkpoint``, ``dataset``, ...)."""
        if self._state is not None:
            self._usable("log_artifact")
            return
        try:
            held = snapshot.hold(path, name, str(kind), self.tracking_dir)
        except Exception as exc:  # noqa: BLE001
            log.warning("log_artifact: cannot read %s (%s: %s); nothing logged", path, type(exc).__name__, exc)
            return
        held.key = kinds.NAMES[held.key]  # a name is data every tracker keeps: no secret in it
        if held.left_out:
            self._warn_once(
                "artifact-journal",
                "log_artifact(%s): left out %s: the tracking directory %s and journal folders are "
                "never part of an artifact (a copy of a journal would be delivered again by "
                "tracking-core sync); the rest is delivered (said once per run)",
                held.source,
                ", ".join(held.left_out[:5]) + (f" and {len(held.left_out) - 5} more" if len(held.left_out) > 5 else ""),
                self.tracking_dir,
            )
        self._intake.artifact(held)

    # -- lifecycle -----------------------------------------------------------------------------
    def flush(self, timeout: float | None = DEFAULT_FINISH_TIMEOUT) -> bool:
        """Deliver what was logged so far to every backend; True if all of it arrived in time
        (False at once for a backend that is down). A secondary waits, up to ``timeout``, for
        the primary to open the run in each backend: until then its records have nowhere to go."""
        timeout = self._seconds("flush", timeout, None)
        if not self._usable("flush") or self._delivery is None:
            return self._delivery is None and self._state is None
        started = time.monotonic()
        reduce.settle(self, timeout)  # this rank's reduced values published; a writer's logged
        snapped = self._intake.snapshots.wait(timeout if timeout is not None else DEFAULT_FINISH_TIMEOUT)
        target = self._intake.pump()
        remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
        return self._delivery.drain(target, remaining) and snapped

    def finish(
        self, timeout: float = DEFAULT_FINISH_TIMEOUT, status: RunStatus | str | None = None
    ) -> FinishSummary:
        """Deliver within ``timeout`` seconds (plus at most one second) and close: a primary ends
        the run with ``status`` (FINISHED, or FAILED when the process is dying of an exception),
        a secondary detaches. A backend that is down is given one probe, not the whole timeout.
        What a backend did not take stays in the journal for ``tracking-core sync``, and the
        summary says what is missing where. Never raises."""
        timeout = self._seconds("finish", timeout, DEFAULT_FINISH_TIMEOUT)  # type: ignore[assignment]
        if self._state == "forked":
            self._usable("finish")
            return FinishSummary(RunStatus.FINISHED, drained=False)
        reduce.settle(self, timeout, final=True)  # the role's last reduced values and trace first
        with self._lock:
            if self.finished is not None:
                return self.finished
            try:
                final = RunStatus(status) if status is not None else lifecycle.default_status()
            except ValueError:
                final = RunStatus.FINISHED
                self._warn_once("status", "finish(status=%r) is not a run status; using FINISHED", status)
            # From here on a call from another thread is one "after finish" (see _usable): the
            # run's end is journaled after what was logged before, and nothing after it.
            self._state = "finishing"
            try:
                summary = self._finish(timeout, final)
            except Exception as exc:  # noqa: BLE001 - never raise into the caller
                log.warning("tracking-core could not finish run %s cleanly (%s: %s)", self.run_id, type(exc).__name__, exc, exc_info=True)
                summary = FinishSummary(final, drained=False, logged=self._intake.logged, journal=str(self.journal) if self.journal else None)
            self.finished = summary
            self._state = "finished"
            lifecycle.unregister(self)
        if self.primary:  # the run's end, said once for the job (see tracking_core.report)
            report.finished(summary, self.handle, tracking_dir=self.tracking_dir, args=self.args)
        else:  # one writer's part: the run's own status is the primary's to say, and a primary
            # open in this process says this writer's part in its own end (it replays its journal)
            save_end(self.run_dir / ENDS_DIR, self.label, self.role, summary)
            level = logging.INFO if summary.drained or lifecycle.primary_open(self.run_id) else logging.WARNING
            log.log(level, "tracking-core %s", summary.describe(f"writer {self.label} {summary.status.value.lower()}"))
        return summary

    def _seconds(self, what: str, value: Any, default: float | None) -> float | None:
        """A ``timeout`` argument as seconds (never raises): a number as it is, None as
        ``default`` (None for flush: no bound), a numeric string as its number, a negative as 0,
        anything else (NaN, a non-numeric string) as ``default``; all but None and a number
        warned once. The longest wait a thread can take bounds it."""
        if value is None:
            return default
        try:
            seconds = float(value)
        except Exception:  # noqa: BLE001 - an object whose __float__ raises anything
            seconds = math.nan
        used = default if math.isnan(seconds) else min(max(seconds, 0.0), MAX_TIMEOUT)  # +inf too
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value:
            return used
        self._warn_once(
            f"timeout-{what}",
            "%s(timeout=%.40r) is not a number of seconds >= 0; %s",
            what,
            value,
            "waiting without a bound" if used is None else f"using {used:g} s",
        )
        return used

    def _finish(self, timeout: float, status: RunStatus) -> FinishSummary:
        deadline = time.monotonic() + timeout
        peers: dict[str, str] = {}  # peers' journals replayed here and still incomplete
        roll: list[dict[str, Any]] = []
        if self.primary:
            from .delivery.sync import await_peers

            # The node's system metrics end first: their last samples before the close.
            end_sampling(self.handle, self.tracking_dir, min(timeout / 4, SYSTEM_TIMEOUT))

            # At most half the timeout for the peers, the rest for this writer's own delivery.
            peers_until = time.monotonic() + min(PEER_TIMEOUT, timeout / 2)
            if self._delivery is not None:
                # The run open in every backend that can be reached first: the other writers'
                # leftovers are replayed into it (a peer that finished before the run was open
                # somewhere left its records for that backend in its journal).
                self._delivery.drain(self._intake.pump(), max(0.0, peers_until - time.monotonic()))
            peers = await_peers(self.handle.tracking_dir, self.run_id, self.journal, peers_until)
            # Who attached, as the job's store says: for this summary and this run's verdict.
            roll = take_roll(self.run_id, self.tracking_dir, min(READ_BOUND, timeout / 4))
        end_n = self._intake.end(status.value, max(0.0, (deadline - time.monotonic()) / 2))
        if self._writer is not None:
            self._writer.seal()  # the folder goes when delivered: no longer made again if gone
        report: dict[str, Any] = {}
        if self._delivery is not None:
            report = self._delivery.finish(end_n, max(0.0, deadline - time.monotonic()))
        self._intake.close()
        summary = FinishSummary.from_report(status, self._intake, report, self._names)
        summary.add_peers(peers)
        summary.roles_without_writer = unwritten_roles(roll)  # the primary's: others have none
        if self.primary:  # this node's writers that finished before it: its end speaks for them
            summary.add_ends(self.run_dir / ENDS_DIR, self.label)
        if self._writer is not None:
            summary.journal_recreated = self._writer.recreated
        return summary

    def _usable(self, what: str) -> bool:
        if self._state is None and os.getpid() == self._pid:
            return True
        if self._state is None:
            self._state = "forked"
        if self._state == "forked":
            self._warn_once(
                "forked",
                "%s() in process %d on a run of process %d it was forked from: ignored (the run "
                "belongs to the parent); call tracking_core.attach(role=...) in this process to "
                "log from it",
                what,
                os.getpid(),
                self._pid,
            )
        else:
            self._warn_once("finished", "%s() after finish() of run %s: ignored", what, self.run_id)
        return False

    def forked(self) -> None:
        """Called in a child process right after ``fork``: the run stays its parent's. The
        inherited journal and lock descriptors are let go of, so that the parent's locks end
        with the parent."""
        self._state = "forked"
        self._intake.forked()  # the child's copies only: the parent's lock stays the parent's
        if self._delivery is not None:
            self._delivery.forget()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.finish(status=RunStatus.KILLED if issubclass(exc_type, KeyboardInterrupt) else RunStatus.FAILED)


class NullRun:
    """What a non-writer rank gets: the same methods, doing nothing, at next to no cost."""

    is_writer = False
    backends: list[str] = []
    finished = None
    journal = None
    group: Any = None
    _gatherer: reduce.Gatherer | None = None

    def __init__(self, handle: RunHandle | None, role: str | None) -> None:
        self.handle = handle
        self.role = role

    @property
    def run_id(self) -> str | None:
        return self.handle.run_id if self.handle else None

    def _nothing(self, *args: Any, **kwargs: Any) -> None:
        return None

    log_config = log_table = log_histogram = log_text = log_artifact = _nothing

    def log_metrics(self, metrics: Any, step: Any = None, step_key: Any = None) -> None:
        reduce.take(self, metrics, step, step_key)  # this rank's share of the role's reduced values

    def timer(self, phase: str, *, step: int, step_key: str | None = None) -> Any:
        return reduce.timer(self, phase, step, step_key)

    def flush(self, timeout: Any = None) -> bool:
        reduce.settle(self, timeout if isinstance(timeout, (int, float)) else None)
        return True

    def finish(self, timeout: Any = None, status: Any = None) -> None:
        reduce.settle(self, timeout if isinstance(timeout, (int, float)) else 30.0, final=True)

    def __enter__(self) -> NullRun:
        return self

    __exit__ = _nothing


def start_run(
    config: Any = None,
    *,
    args: Any = None,
    backends: Sequence[str] | str | None = None,
    tracking_dir: str | os.PathLike[str] | None = None,
    name: str | None = None,
    run_id: str | None = None,
    handle: RunHandle | Mapping[str, Any] | str | os.PathLike[str] | None = None,
    key_style: str | None = None,
    options: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
    flush_interval: float = settings.DEFAULT_FLUSH_INTERVAL,
    export: bool = True,
    delivery: str | None = None,
) -> Run:
    """Start the job's run in every selected backend (call this once, in the driver); returns
    at once, without waiting for any tracker.

    ``config`` (any host object; default ``args``) is logged as the launch config. The run is
    named ``name``, else ``args.tracking_run_name`` (``--tracking-run-name``), else its id. Backends are
    chosen by ``backends``, else ``args.tracking_backends``, ``$TRACKING_CORE_BACKENDS``, the
    host's own switches, then the embedded default. ``handle`` resumes an existing run. Each
    backend opens the run in the background; one that cannot be reached stays in the run: its
    records wait in the journal until it is back (or ``tracking-core sync``). The handle is saved
    in the run directory and, with ``export``, put in ``$TRACKING_CORE_RUN`` and on
    ``args.tracking_run`` so that child processes can attach. ``delivery`` (``process`` or
    ``thread``; default ``args.tracking_delivery``, ``$TRACKING_CORE_DELIVERY``, else
    ``process`` where possible) says where the trackers' client code runs.

    Without ``run_id`` (or ``handle``), a job the launcher names gets its run id from that name
    (:func:`tracking_core.launchers.job_run_id`: ``$TRACKING_CORE_RUN_ID``,
    ``$TORCHELASTIC_RUN_ID``, ``$SLURM_JOB_ID``, Ray's job), so that every process of the job,
    and a restarted driver, finds the same run; otherwise a new one.
    """
    manager = get_plugin_manager()
    tags = _redacted_tags(tags)
    resumed = RunHandle.parse(handle) if handle is not None else None
    if resumed is not None:
        names, source = list(resumed.backends), "the resumed run handle"
    else:
        names, source = resolve_backend_names(args=args, explicit=backends, manager=manager)
    specs = manager.select(names, source)
    run_options = _options_of(args, options)
    if resumed is not None:
        run_handle, where = _resumed_here(resumed, args, tracking_dir)
        whence = "the resumed run handle"
    else:
        rid, whence = (run_id, "run_id=") if run_id else _job_or_new_id()
        directory, chosen_by = opts.tracking_dir_source(args, tracking_dir)
        where = (Path(directory).absolute(), chosen_by)
        name = name or getattr(args, "tracking_run_name", None)
        name = kinds.NAMES[name] if name else rid  # trackers keep the name: no secret in it
        run_handle = _new_handle(rid, name, where[0], opts.key_style(args, key_style), specs, run_options, tags)
    setup = RunSetup(None, decide_writer().rank, "", specs, manager, run_options, where, args, flush_interval,
                     delivery, tags, resumed is not None)
    run = Run(run_handle, setup)
    path = run.save_handle()
    log.info(
        "tracking-core run %s %s with %s (selected by %s; run id from %s); run handle saved to %s",
        run_handle.run_id,
        "resumed" if resumed else "started",
        ", ".join(names) or "no backend",
        source,
        whence,
        path,
    )
    report.started(run_handle, resumed=resumed is not None, args=args)
    if export:
        _export(run_handle, args)
    launch = config if config is not None else args
    if launch is not None:
        run.log_config(launch, role=None)
    start_sampler(run_handle, attach, args=args, tracking_dir=run.tracking_dir)
    return run


def _new_handle(
    run_id: str,
    name: str,
    tracking_dir: Path,
    key_style: str,
    specs: Sequence[BackendSpec],
    options: Mapping[str, Any],
    tags: Mapping[str, str],
) -> RunHandle:
    """A new run's handle, made on this host: where each backend's run goes, decided now
    without connecting anywhere, and every backend pending (the primary opens the run; each
    backend finds it by its run id)."""
    handle = RunHandle(
        run_id=run_id,
        name=name,
        tracking_dir=str(tracking_dir),
        key_style=key_style,
        host=socket.gethostname(),
        pending=[spec.name for spec in specs],
    )
    context = RunContext(
        backend="", run_id=run_id, name=name, primary=True, tracking_dir=tracking_dir, options=options, tags=dict(tags)
    )
    for spec in specs:
        try:
            target = spec.resolve_target()
            handle.backends[spec.name] = plain(dict(target(dataclasses.replace(context, backend=spec.name)) or {})) if target else {}
        except Exception as exc:  # noqa: BLE001 - the backend reports it again when it opens
            log.warning("backend %r cannot say where its run goes (%s: %s)", spec.name, type(exc).__name__, exc)
            handle.backends[spec.name] = {"target_error": f"{type(exc).__name__}: {exc}"}
    return handle


def _job_or_new_id() -> tuple[str, str]:
    """The job's run id for the first run this process starts (a restarted driver finds its
    run again), a new id for any later one: one process starting run after run (a sweep, a
    notebook under Ray) gets one run each."""
    job = job_run_id()
    if job is None:
        return new_run_id(), "a new id"
    with _JOB_IDS_LOCK:
        if job[0] not in _JOB_IDS_TAKEN:
            _JOB_IDS_TAKEN.add(job[0])
            return job
    return new_run_id(), f"a new id (this process started the run of {job[1]}, {job[0]}, before)"


def _resumed_here(resumed: RunHandle, args: Any, tracking_dir: Any) -> tuple[RunHandle, tuple[Path, str]]:
    """A resumed run's handle as this primary's, and its tracking directory: the handle's on
    the host that made it (unless ``tracking_dir=`` says otherwise), else this process's own,
    the handle then naming it and this host (the targets' paths moved under it)."""
    if tracking_dir is None and resumed.on_primary_host():
        resumed.host = resumed.host or socket.gethostname()
        return resumed, (Path(resumed.tracking_dir), "the resumed run handle")
    directory, chosen_by = opts.tracking_dir_source(args, tracking_dir)
    where = Path(directory).absolute()
    return dataclasses.replace(resumed.rebased(where), tracking_dir=str(where), host=socket.gethostname()), (where, chosen_by)


def _redacted_tags(tags: Mapping[str, str] | None) -> dict[str, str]:
    """The run's tags with secret shapes replaced in keys and values, and the value of a tag
    whose key names a credential replaced whole (the config's rules: docs/secrets.md)."""
    try:
        return dict(redact(to_plain(dict(tags or {}))[0])[0])
    except Exception as exc:  # noqa: BLE001 - start never raises over a tag
        log.warning("start_run(tags=...) is not a mapping of name to text (%s: %s); no tags", type(exc).__name__, exc)
        return {}


def _export(handle: RunHandle, args: Any) -> None:
    os.environ[RUN_ENV] = handle.to_json()
    try:
        setattr(args, ARGS_ATTR, handle.to_json())
    except (AttributeError, TypeError):  # no args (None), or args that take no attribute
        pass


def attach(
    handle: RunHandle | Mapping[str, Any] | str | None = None,
    *,
    role: str,
    args: Any = None,
    config: Any = None,
    writer: bool | None = None,
    collect: bool = True,
    metric_prefix: str | None = None,
    options: Mapping[str, Any] | None = None,
    flush_interval: float = settings.DEFAULT_FLUSH_INTERVAL,
    delivery: str | None = None,
    tracking_dir: str | os.PathLike[str] | None = None,
    group: Any = None,
) -> Run | NullRun:
    """Attach this process to the job's run as ``role`` (never a collective call, never waits
    for a tracker).

    The handle comes from ``handle``, ``args.tracking_run`` or ``$TRACKING_CORE_RUN`` (a
    malformed one is a ``ValueError`` saying so). Without one, the launcher's job identity
    names the run (:func:`tracking_core.launchers.job_run_id`): the backends are chosen as
    :func:`start_run` chooses them, their targets computed here, and each finds the run the
    primary opened by its run id. Neither found is a ``ValueError``. Only the role's writer rank
    (see :mod:`tracking_core.writer`; ``writer`` overrides; ``group``, the torch.distributed
    group of the role's ranks, names them: its rank 0 writes) gets a live run; the others get a
    :class:`NullRun`. Where torch.distributed is initialised, this process announces itself in
    the job's store (:mod:`tracking_core.attendance`): the primary then knows every writer from
    the moment it attached, and every role whose ranks attached with no writer. The writer logs
    the role's config: ``config`` merged with what every collector returns for the role
    (``collect=False`` skips the collectors). Metric names get
    ``metric_prefix`` (default ``"<role>/"``; ``""`` passes names through). ``delivery`` is as
    for :func:`start_run`. The writer journals and keeps its local files under its own tracking
    directory (:func:`local_tracking_dir`; ``tracking_dir`` overrides).
    """
    run_handle, found_by = _find_run(handle, args, role, options, tracking_dir)
    decision = decide_writer(writer, group, role)
    if not decision.writer:
        log.debug("role %r: not the writer (%s); logging is a no-op here", role, decision.reason)
        announce(run_handle.run_id, role, decision)
        start_sampler(run_handle, attach, args=args, tracking_dir=tracking_dir)
        null = NullRun(run_handle, role)
        null.group = group
        return null
    manager = get_plugin_manager()
    specs = manager.select(list(run_handle.backends))
    prefix = metric_prefix if metric_prefix is not None else f"{role}/"
    where = local_tracking_dir_source(run_handle, args, tracking_dir)
    options = _options_of(args, options)
    setup = RunSetup(role, decision.rank, prefix, specs, manager, options, where, args, flush_interval, delivery)
    run = Run(run_handle, setup)
    run.group = group
    run.save_handle()  # where none is yet (another node's directory): for show and sync there
    announce(run_handle.run_id, role, decision, label=run.label, tracking_dir=str(run.tracking_dir))
    log.info(
        "tracking-core: process %s attached to run %s (found from %s) as role %r (%s; host %s; tracking dir %s)",
        os.getpid(),
        run_handle.run_id,
        found_by,
        role,
        decision.reason,
        socket.gethostname(),
        run.tracking_dir,
    )
    if collect or config is not None:
        _log_role_config(run, manager, role, args, config, collect)
    start_sampler(run_handle, attach, args=args, tracking_dir=run.tracking_dir)
    return run


def _find_run(
    handle: Any, args: Any, role: str, options: Mapping[str, Any] | None, tracking_dir: Any
) -> tuple[RunHandle, str]:
    """The run to attach to and where it was found: a handle, else the job's identity, the
    backends then chosen as :func:`start_run` chooses them and their targets computed here."""
    found = find_handle_source(handle, args)
    if found is not None:
        return found
    job = job_run_id()
    if job is None:
        raise ValueError(
            f"attach(role={role!r}) found no run handle: pass handle=, set args.{ARGS_ATTR}, or "
            f"export ${RUN_ENV} from the process that called start_run(); or give every process "
            f"of the job the same job id, from which start_run and attach derive the run id: "
            f"{', '.join(JOB_ID_SOURCES)}"
        )
    manager = get_plugin_manager()
    names, source = resolve_backend_names(args=args, explicit=None, manager=manager)
    specs = manager.select(names, source)
    where = local_tracking_dir(None, args, tracking_dir)
    run_handle = _new_handle(job[0], job[0], where, opts.key_style(args), specs, _options_of(args, options), {})
    return run_handle, f"{job[1]} (no run handle)"


def _log_role_config(run: Run, manager: PluginManager, role: str, args: Any, config: Any, collect: bool) -> None:
    parts: list[tuple[str, Any]] = []
    if config is not None:
        parts.append(("attach(config=...)", _as_mapping(config)))
    if collect:
        parts.extend(manager.call_each("collect_config", role=role, args=args))
    try:
        merged = merge_collected(role, parts)
    except Exception as exc:  # noqa: BLE001 - never raise into the host
        log.warning("could not merge role %r's config (%s: %s)", role, type(exc).__name__, exc)
        return
    conflicts = [c.as_dict() for c in merged.conflicts]
    run.log_config(merged.values, role=role, report={"collector_conflicts": conflicts} if conflicts else None)


def _without_handle(section: ConfigSection) -> ConfigSection:
    """The run handle travels on ``args.tracking_run``; it is plumbing, not config."""
    if ARGS_ATTR not in section.values:
        return section
    values = {k: v for k, v in section.values.items() if k != ARGS_ATTR}
    params = {k: v for k, v in section.params.items() if k != section.prefix + ARGS_ATTR}
    return dataclasses.replace(section, values=values, params=params)


def _as_mapping(config: Any) -> Mapping[str, Any]:
    if isinstance(config, Mapping):
        return config
    try:
        return dict(vars(config))
    except TypeError:
        plain_config, _ = to_plain(config)
        return plain_config
