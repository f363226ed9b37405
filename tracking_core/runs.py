"""Runs: the primary opens the job's run, secondaries attach to it with a role.

>>> run = tracking_core.start_run(config=args)           # the driver
>>> child = tracking_core.attach(role="actor")            # a worker, handle from $TRACKING_CORE_RUN
>>> child.log_metrics({"loss": 0.1}, step=3, step_key="train/step")
>>> run.finish()

Only the selected backends are built; each is registered as a plugin under its name for the life
of the run and unregistered when the run ends. A non-writer rank gets a :class:`NullRun` whose
methods do nothing. A process that exits without calling ``finish`` still delivers what it logged
(an exit hook drains every open run within ``exit_timeout``).
"""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import json
import logging
import os
import secrets
import socket
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import options as opts
from .collectors import merge_collected
from .context import RunContext
from .dispatch import DEFAULT_FLUSH_INTERVAL, BackendWorker
from .handle import ARGS_ATTR, RUN_ENV, RunHandle, find_handle
from .plugins import PluginManager, get_plugin_manager
from .records import ConfigSection, RunStatus
from .registry import BackendSpec
from .selection import resolve_backend_names
from .writer import decide_writer

log = logging.getLogger("tracking_core.runs")

DEFAULT_OPEN_TIMEOUT = 120.0
DEFAULT_FINISH_TIMEOUT = 30.0

_seq = itertools.count()
#: Records of one log call get consecutive sequence numbers inside a span of this size.
ROW_SPAN = 1 << 20
_open_runs: weakref.WeakSet[Run] = weakref.WeakSet()
_failed = False


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def _options_of(args: Any, extra: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args is not None:
        try:
            out.update(vars(args))
        except TypeError:
            if isinstance(args, Mapping):
                out.update(args)
    if extra:
        out.update(extra)
    return out


class BackendSlot:
    """One selected backend in this process: builds the instance on first use, registers it as a
    plugin under the backend's name, and calls its hook implementations alone."""

    def __init__(self, spec: BackendSpec, context: RunContext, manager: PluginManager) -> None:
        self.spec = spec
        self.context = context
        self.manager = manager
        self.instance: Any = None
        self.plugin_name: str | None = None
        self._impls: dict[str, Any] = {}

    def _build(self) -> None:
        factory = self.spec.resolve_factory()
        instance = factory(self.context)
        name = self.spec.name
        n = 1
        while self.manager.pm.get_plugin(name) is not None or name in self.manager.plugins:
            n += 1
            name = f"{self.spec.name}#{n}"
        if not self.manager.register(instance, name):
            error = self.manager.plugins.get(name)
            self.manager.plugins.pop(name, None)
            raise TypeError(
                f"backend {self.spec.name!r} (plugin {self.spec.plugin!r}) built an invalid "
                f"instance: {error.error if error else 'rejected by the plugin manager'}"
            )
        self.instance = instance
        self.plugin_name = name
        for caller in self.manager.pm.get_hookcallers(instance) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is instance:
                    self._impls[caller.name] = impl

    def call(self, hook: str, **kwargs: Any) -> Any:
        if self.instance is None:
            self._build()
        impl = self._impls.get(hook)
        if impl is None:
            return None
        return impl.function(**{k: kwargs[k] for k in impl.argnames if k in kwargs})

    def release(self) -> None:
        if self.plugin_name is not None:
            self.manager.unregister(self.plugin_name)
            self.plugin_name = None


@dataclass
class FinishSummary:
    status: RunStatus
    drained: bool
    backends: dict[str, dict[str, Any]] = field(default_factory=dict)

    def describe(self) -> str:
        parts = []
        for name, info in self.backends.items():
            text = f"{name}: {info['delivered']} records delivered"
            if info["backlog"]:
                text += f", {info['backlog']} NOT delivered"
            if info["failures"]:
                failures = ", ".join(f"{k} x{v}" for k, v in info["failures"].items())
                text += f", failures: {failures}"
            if info["skipped"]:
                text += f", non-numeric values skipped: {sum(info['skipped'].values())}"
            parts.append(text)
        return f"run {self.status.value}; " + ("; ".join(parts) or "no backends")


class Run:
    """A run as seen from one process: the primary's or a secondary writer's."""

    is_writer = True

    def __init__(
        self,
        handle: RunHandle,
        *,
        primary: bool,
        role: str | None,
        slots: dict[str, BackendSlot],
        workers: dict[str, BackendWorker],
        args: Any = None,
        metric_prefix: str | None = None,
        exit_timeout: float = DEFAULT_FINISH_TIMEOUT,
    ) -> None:
        self.handle = handle
        self.primary = primary
        self.role = role
        self.args = args
        self._slots = slots
        self._workers = workers
        self.metric_prefix = (
            metric_prefix if metric_prefix is not None else (f"{role}/" if role else "")
        )
        self.exit_timeout = exit_timeout
        self.finished: FinishSummary | None = None
        self._lock = threading.Lock()
        _open_runs.add(self)

    @property
    def run_id(self) -> str:
        return self.handle.run_id

    @property
    def backends(self) -> list[str]:
        return list(self._workers)

    # -- config --------------------------------------------------------------------------------
    def log_config(
        self,
        config: Any,
        role: str | None | type[Ellipsis] = ...,
        report: Mapping[str, Any] | None = None,
    ) -> ConfigSection:
        """Log ``config`` (any host object) as the launch config (``role=None``) or a role's.

        By default a primary logs the launch config and a secondary its own role's. The config
        is converted, redacted and keyed (see the README's key convention), saved as JSON in the
        run directory and queued for every backend. ``report`` adds entries to the section's
        report (collector conflicts, say). Returns the section that was logged.
        """
        from .config import build_section, config_json

        role = self.role if role is ... else role
        section = build_section(config, role, self.handle.key_style)
        if report:
            section = dataclasses.replace(section, report={**section.report, **report})
        self._save_config(section, config_json(section))
        for worker in self._workers.values():
            worker.submit("config", section)
        return section

    def _save_config(self, section: ConfigSection, text: str) -> None:
        path = self.handle.run_dir / "config" / f"{section.namespace}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(text)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not save config %s (%s); backends still receive it", path, exc)

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
        if self.finished is not None:
            return
        row = (next(_seq) * ROW_SPAN, time.time(), dict(metrics), step, step_key, self.metric_prefix, self.role)
        for worker in self._workers.values():
            worker.put_row(row)

    # -- lifecycle -----------------------------------------------------------------------------
    def flush(self, timeout: float | None = DEFAULT_FINISH_TIMEOUT) -> bool:
        """Deliver what was logged so far to every backend; True if all of it arrived in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        ok = True
        for worker in self._workers.values():
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ok = worker.flush(remaining) and ok
        return ok

    def finish(
        self, timeout: float = DEFAULT_FINISH_TIMEOUT, status: RunStatus | str | None = None
    ) -> FinishSummary:
        """Drain within ``timeout`` seconds and close: a primary ends the run with ``status``
        (FINISHED unless the process is failing), a secondary flushes and detaches."""
        with self._lock:
            if self.finished is not None:
                return self.finished
            if status is None:
                status = RunStatus.FAILED if _failed else RunStatus.FINISHED
            status = RunStatus(status)
            deadline = time.monotonic() + timeout
            events = [w.submit("close", status) for w in self._workers.values()]
            for event in events:
                event.wait(max(0.0, deadline - time.monotonic()))
            drained = self.flush(max(0.0, deadline - time.monotonic()))
            summary = FinishSummary(status, drained)
            for name, worker in self._workers.items():
                worker.stop()
                summary.backends[name] = {
                    "delivered": worker.delivered,
                    "backlog": worker.backlog(),
                    "failures": dict(worker.failures.counts),
                    "skipped": dict(worker.skipped),
                }
            for slot in self._slots.values():
                slot.release()
            self.finished = summary
            _open_runs.discard(self)
        level = logging.INFO if drained and not any(
            b["failures"] for b in summary.backends.values()
        ) else logging.WARNING
        log.log(level, "tracking-core %s", summary.describe())
        return summary

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.finish()
        elif issubclass(exc_type, KeyboardInterrupt):
            self.finish(status=RunStatus.KILLED)
        else:
            self.finish(status=RunStatus.FAILED)


class NullRun:
    """What a non-writer rank gets: the same methods, doing nothing, at next to no cost."""

    is_writer = False
    backends: list[str] = []
    finished = None

    def __init__(self, handle: RunHandle | None, role: str | None) -> None:
        self.handle = handle
        self.role = role

    @property
    def run_id(self) -> str | None:
        return self.handle.run_id if self.handle else None

    def log_config(self, config: Any, role: Any = ...) -> None:
        return None

    def log_metrics(self, metrics: Any, step: Any = None, step_key: Any = None) -> None:
        return None

    def flush(self, timeout: Any = None) -> bool:
        return True

    def finish(self, timeout: Any = None, status: Any = None) -> None:
        return None

    def __enter__(self) -> NullRun:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _make_slots(
    specs: Sequence[BackendSpec],
    manager: PluginManager,
    *,
    handle: RunHandle,
    primary: bool,
    role: str | None,
    rank: int | None,
    options: Mapping[str, Any],
    tags: Mapping[str, str],
    resume: bool,
    flush_interval: float,
) -> tuple[dict[str, BackendSlot], dict[str, BackendWorker]]:
    label = "primary" if primary else f"{role}-r{rank if rank is not None else 0}-p{os.getpid()}"
    slots: dict[str, BackendSlot] = {}
    workers: dict[str, BackendWorker] = {}
    for spec in specs:
        context = RunContext(
            backend=spec.name,
            run_id=handle.run_id,
            name=handle.name,
            primary=primary,
            tracking_dir=Path(handle.tracking_dir),
            role=role,
            label=label,
            rank=rank,
            options=options,
            tags=dict(tags),
            resume=resume,
        )
        slot = BackendSlot(spec, context, manager)
        slots[spec.name] = slot
        workers[spec.name] = BackendWorker(
            spec.name,
            slot.call,
            context,
            flush_interval=flush_interval,
        )
    return slots, workers


def start_run(
    config: Any = None,
    *,
    args: Any = None,
    backends: Sequence[str] | str | None = None,
    tracking_dir: str | os.PathLike[str] | None = None,
    name: str | None = None,
    run_id: str | None = None,
    handle: RunHandle | Mapping[str, Any] | str | None = None,
    key_style: str | None = None,
    options: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
    open_timeout: float = DEFAULT_OPEN_TIMEOUT,
    flush_interval: float = DEFAULT_FLUSH_INTERVAL,
    export: bool = True,
) -> Run:
    """Open the job's run in every selected backend (call this once, in the driver).

    ``config`` (any host object; default ``args``) is logged as the launch config. Backends are
    chosen by ``backends``, else ``args.tracking_backends``, ``$TRACKING_CORE_BACKENDS``, the
    host's own switches, then the embedded default. ``handle`` resumes an existing run. The
    returned run's ``handle`` is saved in the run directory and, with ``export``, put in
    ``$TRACKING_CORE_RUN`` and on ``args.tracking_run`` so that child processes can attach.
    """
    manager = get_plugin_manager()
    resumed = RunHandle.parse(handle) if handle is not None else None
    if resumed is not None:
        names = list(resumed.backends)
        source = "the resumed run handle"
    else:
        names, source = resolve_backend_names(args=args, explicit=backends, manager=manager)
    specs = manager.select(names)
    tdir = Path(opts.tracking_dir(args, tracking_dir)).absolute()
    if resumed is not None:
        run_handle = resumed
        run_handle.tracking_dir = run_handle.tracking_dir or str(tdir)
    else:
        rid = run_id or new_run_id()
        run_handle = RunHandle(
            run_id=rid,
            name=name or rid,
            tracking_dir=str(tdir),
            key_style=opts.key_style(args, key_style),
        )
    slots, workers = _make_slots(
        specs,
        manager,
        handle=run_handle,
        primary=True,
        role=None,
        rank=decide_writer().rank,
        options=_options_of(args, options),
        tags=tags or {},
        resume=resumed is not None,
        flush_interval=flush_interval,
    )
    pending = {}
    for spec_name, worker in workers.items():
        if resumed is not None:
            payload = {"attach": resumed.backends.get(spec_name, {})}
            pending[spec_name] = (payload, worker.submit("attach", payload))
        else:
            payload = {}
            pending[spec_name] = (payload, worker.submit("open", payload))
    deadline = time.monotonic() + open_timeout
    for spec_name, (payload, event) in pending.items():
        event.wait(max(0.0, deadline - time.monotonic()))
        if not payload.get("ok"):
            log.warning(
                "backend %r could not %s the run within %.0f s; it is left out of this run "
                "(see the warning above for the cause)",
                spec_name,
                "resume" if resumed else "open",
                open_timeout,
            )
            workers.pop(spec_name).stop()
            slots.pop(spec_name).release()
            continue
        result = payload.get("result")
        if result is not None:
            run_handle.backends[spec_name] = json.loads(json.dumps(dict(result), default=str))
        else:
            run_handle.backends.setdefault(spec_name, {})
    run = Run(run_handle, primary=True, role=None, slots=slots, workers=workers, args=args)
    path = run_handle.save()
    log.info(
        "tracking-core run %s %s with %s (selected by %s); run handle saved to %s",
        run_handle.run_id,
        "resumed" if resumed else "started",
        ", ".join(workers) or "no backend",
        source,
        path,
    )
    if export:
        os.environ[RUN_ENV] = run_handle.to_json()
        if args is not None:
            try:
                setattr(args, ARGS_ATTR, run_handle.to_json())
            except (AttributeError, TypeError):
                pass
    launch = config if config is not None else args
    if launch is not None:
        run.log_config(launch, role=None)
    return run


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
    flush_interval: float = DEFAULT_FLUSH_INTERVAL,
) -> Run | NullRun:
    """Attach this process to the job's run as ``role`` (never a collective call).

    The handle comes from ``handle``, ``args.tracking_run`` or ``$TRACKING_CORE_RUN``. Only the
    role's writer rank (see :mod:`tracking_core.writer`; ``writer`` overrides) gets a live run;
    the others get a :class:`NullRun`. The writer logs the role's config: ``config`` merged with
    what every collector returns for the role (``collect=False`` skips them).
    """
    run_handle = find_handle(handle, args)
    if run_handle is None:
        raise ValueError(
            f"attach(role={role!r}) found no run handle: pass handle=, set args.{ARGS_ATTR}, or "
            f"export ${RUN_ENV} from the process that called start_run()"
        )
    decision = decide_writer(writer)
    if not decision.writer:
        log.debug("role %r: not the writer (%s); logging is a no-op here", role, decision.reason)
        return NullRun(run_handle, role)
    manager = get_plugin_manager()
    specs = manager.select(list(run_handle.backends))
    slots, workers = _make_slots(
        specs,
        manager,
        handle=run_handle,
        primary=False,
        role=role,
        rank=decision.rank,
        options=_options_of(args, options),
        tags={},
        resume=False,
        flush_interval=flush_interval,
    )
    for spec_name, worker in workers.items():
        worker.submit("attach", {"attach": run_handle.backends.get(spec_name, {})})
    run = Run(
        run_handle,
        primary=False,
        role=role,
        slots=slots,
        workers=workers,
        args=args,
        metric_prefix=metric_prefix,
    )
    log.info(
        "tracking-core: %s attached to run %s as role %r (%s; host %s)",
        os.getpid(),
        run_handle.run_id,
        role,
        decision.reason,
        socket.gethostname(),
    )
    if collect or config is not None:
        parts: list[tuple[str, Any]] = []
        if config is not None:
            parts.append(("attach(config=...)", _as_mapping(config)))
        if collect:
            parts.extend(manager.call_each("collect_config", role=role, args=args))
        merged = merge_collected(role, parts)
        conflicts = [c.as_dict() for c in merged.conflicts]
        run.log_config(
            merged.values, role=role, report={"collector_conflicts": conflicts} if conflicts else None
        )
    return run


def _as_mapping(config: Any) -> Mapping[str, Any]:
    if isinstance(config, Mapping):
        return config
    try:
        return dict(vars(config))
    except TypeError:
        from .config import to_plain

        plain, _ = to_plain(config)
        return plain


# -- process exit -------------------------------------------------------------------------------
def _excepthook(exc_type: Any, exc: Any, tb: Any) -> None:
    global _failed
    _failed = True
    _previous_excepthook(exc_type, exc, tb)


_previous_excepthook = sys.excepthook
sys.excepthook = _excepthook


@atexit.register
def _finish_at_exit() -> None:
    """Deliver what every unfinished run logged before the interpreter goes."""
    for run in list(_open_runs):
        try:
            run.finish(timeout=run.exit_timeout)
        except Exception:  # noqa: BLE001 - never fail an exiting process
            log.exception("tracking-core could not finish run %s at exit", run.run_id)
