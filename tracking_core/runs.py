"""Runs: the primary opens the job's run, secondaries attach to it with a role.

>>> run = tracking_core.start_run(config=args)           # the driver
>>> child = tracking_core.attach(role="actor")            # a worker, handle from $TRACKING_CORE_RUN
>>> child.log_metrics({"loss": 0.1}, step=3, step_key="train/step")
>>> run.finish()

Only the selected backends are built; each is registered as a plugin under its name for the life
of the run and unregistered when the run ends. A non-writer rank gets a :class:`NullRun` whose
methods do nothing. A process that exits without calling ``finish`` still delivers what it logged
(see :mod:`tracking_core.lifecycle`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import lifecycle
from . import options as opts
from .collectors import merge_collected
from .context import RunContext
from .dispatch import DEFAULT_FLUSH_INTERVAL, Dispatcher, local_workers
from .handle import ARGS_ATTR, RUN_ENV, RunHandle, attach_arguments, find_handle
from .journal import JOURNAL_DIR, Journal
from .plugins import PluginManager, get_plugin_manager
from .records import ConfigSection, RunStatus
from .registry import BackendSpec
from .remote import DeliveryUnavailable, delivery_mode, start_delivery_process
from .selection import resolve_backend_names
from .slots import BackendSlot
from .writer import decide_writer

log = logging.getLogger("tracking_core.runs")

DEFAULT_OPEN_TIMEOUT = 60.0
DEFAULT_FINISH_TIMEOUT = 30.0
#: How long a finishing primary waits, at most, for the other writers of the run on its node.
PEER_TIMEOUT = 10.0

_seq = itertools.count()
#: Records of one log call get consecutive sequence numbers inside a span of this size.
ROW_SPAN = 1 << 20


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(3).hex()


def _options_of(args: Any, extra: Mapping[str, Any] | None) -> dict[str, Any]:
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
    return out


@dataclass
class FinishSummary:
    """What ``finish`` achieved, per backend: delivered records, what is left, failure counts."""

    status: RunStatus
    drained: bool
    logged: int = 0
    journal: str | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    backends: dict[str, dict[str, Any]] = field(default_factory=dict)

    def describe(self) -> str:
        if not self.logged and not self.journal:
            return f"run {self.status.value}; no metrics logged in this process"
        parts = []
        for name, info in self.backends.items():
            text = f"{name}: {info['delivered']} records delivered"
            if info["undelivered"]:
                text += f", {info['undelivered']} NOT delivered"
            if info["failures"]:
                failures = ", ".join(f"{k} x{v}" for k, v in info["failures"].items())
                text += f", failures: {failures}"
            parts.append(text)
        text = f"run {self.status.value}; " + ("; ".join(parts) or "no backends")
        if self.skipped:
            text += f"; non-numeric values skipped: {sum(self.skipped.values())}"
        if self.journal:
            text += f"; what is missing is kept in {self.journal}: run `tracking-core sync`"
        return text


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
        dispatcher: Dispatcher,
        journal: Journal | None,
        args: Any = None,
        exit_timeout: float | None = None,
    ) -> None:
        self.handle = handle
        self.primary = primary
        self.role = role
        self.args = args
        self.metric_prefix = dispatcher.prefix
        self._slots = slots
        self._dispatcher = dispatcher
        self._append = dispatcher.intake.append
        self.journal = journal
        self.exit_timeout = exit_timeout if exit_timeout is not None else lifecycle.exit_timeout()
        self.finished: FinishSummary | None = None
        self._lock = threading.Lock()
        lifecycle.register(self)

    @property
    def run_id(self) -> str:
        return self.handle.run_id

    @property
    def backends(self) -> list[str]:
        return list(self._dispatcher.workers)

    # -- config --------------------------------------------------------------------------------
    def log_config(
        self,
        config: Any,
        role: str | None | type[Ellipsis] = ...,
        report: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> ConfigSection:
        """Log ``config`` (any host object) as the launch config (``role=None``) or a role's.

        By default a primary logs the launch config and a secondary its own role's. The config
        is converted, redacted and keyed (see the README's key convention), saved as JSON in the
        run directory, journaled and queued for every backend. ``report`` adds entries to the
        section's report (collector conflicts, say). ``namespace`` names a further namespace
        of the role (its own JSON artifact, e.g. ``actor-ranks``) instead of the role's own.
        Returns the section that was logged.
        """
        from .config import build_section, config_json

        role = self.role if role is ... else role
        section = _without_handle(build_section(config, role, self.handle.key_style))
        if report:
            section = dataclasses.replace(section, report={**section.report, **report})
        if namespace:
            section = dataclasses.replace(section, namespace=namespace)
        self._save_config(section, config_json(section))
        config_id = self.journal.config(section) if self.journal is not None else None
        self._dispatcher.submit("config", (section, config_id))
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
        if self.finished is None:
            self._append((next(_seq) * ROW_SPAN, time.time(), dict(metrics), step, step_key))

    # -- lifecycle -----------------------------------------------------------------------------
    def flush(self, timeout: float | None = DEFAULT_FINISH_TIMEOUT) -> bool:
        """Deliver what was logged so far to every backend; True if all of it arrived in time."""
        return self._dispatcher.flush(timeout)

    def finish(
        self, timeout: float = DEFAULT_FINISH_TIMEOUT, status: RunStatus | str | None = None
    ) -> FinishSummary:
        """Drain within ``timeout`` seconds and close: a primary ends the run with ``status``
        (FINISHED, or FAILED when the process is dying of an exception), a secondary flushes and
        detaches. What a backend did not acknowledge in time stays in the journal."""
        with self._lock:
            if self.finished is not None:
                return self.finished
            status = RunStatus(status) if status is not None else lifecycle.default_status()
            deadline = time.monotonic() + timeout
            if self.primary:
                self._await_peers(time.monotonic() + min(PEER_TIMEOUT, timeout / 2))
            events = self._dispatcher.submit("close", status)
            for event in events:
                event.wait(max(0.0, deadline - time.monotonic()))
            drained = self._dispatcher.flush(max(0.0, deadline - time.monotonic()))
            self._dispatcher.stop()
            summary = self._summarise(status, drained)
            for slot in self._slots.values():
                slot.release()
            self.finished = summary
            lifecycle.unregister(self)
        level = logging.INFO if drained and not summary.journal else logging.WARNING
        log.log(level, "tracking-core %s", summary.describe())
        return summary

    def _await_peers(self, deadline: float) -> None:
        from .peers import await_peers

        healthy = all(not w.circuit_open and w.ready for w in self._dispatcher.workers.values())
        own = self.journal.path if self.journal is not None else None
        await_peers(self.handle.tracking_dir, self.run_id, own, deadline, replay=healthy)

    def _summarise(self, status: RunStatus, drained: bool) -> FinishSummary:
        dispatcher = self._dispatcher
        summary = FinishSummary(
            status, drained, logged=dispatcher.logged, skipped=dict(dispatcher.skipped)
        )
        complete = drained
        for name, worker in dispatcher.workers.items():
            undelivered = max(0, dispatcher.logged - worker.delivered)
            complete = complete and undelivered == 0
            summary.backends[name] = {
                "delivered": worker.delivered,
                "undelivered": undelivered,
                "failures": dict(worker.failures.counts),
                "spills": worker.spills,
            }
        if self.journal is not None:
            self.journal.end(status.value)
            if not complete:
                summary.journal = str(self.journal.path)
            self.journal.close(remove=complete)
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
    journal = None

    def __init__(self, handle: RunHandle | None, role: str | None) -> None:
        self.handle = handle
        self.role = role

    @property
    def run_id(self) -> str | None:
        return self.handle.run_id if self.handle else None

    def log_config(self, config: Any, role: Any = ..., report: Any = None, namespace: Any = None) -> None:
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


def replay_options(options: Mapping[str, Any], backends: Sequence[str]) -> dict[str, Any]:
    """The backend options ``tracking-core sync`` needs to reach the same trackers: each
    backend's own plain-valued options (``mlflow_tracking_uri``), never a credential."""
    from .config import classify_name

    out = {}
    for key, value in options.items():
        if not any(key.startswith(f"{name}_") for name in backends):
            continue
        if isinstance(value, (str, int, float, bool)) and classify_name(key) is None:
            out[key] = value
    return out


def _journal_path(handle: RunHandle, label: str) -> Path:
    stamp = f"{time.time_ns() // 1_000_000:x}"
    return Path(handle.tracking_dir) / JOURNAL_DIR / handle.run_id / f"{label}-{stamp}.jsonl"


def _build(
    specs: Sequence[BackendSpec],
    manager: PluginManager,
    *,
    handle: RunHandle,
    primary: bool,
    role: str | None,
    rank: int | None,
    prefix: str,
    options: Mapping[str, Any],
    tags: Mapping[str, str],
    resume: bool,
    flush_interval: float,
    journal: bool,
    delivery: str | None,
    actions: Mapping[str, str],
) -> tuple[dict[str, BackendSlot], Dispatcher, Journal | None]:
    """The run's journal, dispatcher and workers: in a delivery process (which starts running
    ``actions``, ``open`` or ``attach`` per backend, at once) or on threads of this process."""
    label = "primary" if primary else f"{role}-r{rank if rank is not None else 0}"
    label = f"{label}-p{os.getpid()}"
    journal_obj = None
    if journal and specs:
        journal_obj = Journal(
            _journal_path(handle, label),
            {
                "handle": json.loads(handle.to_json()),
                "primary": primary,
                "role": role,
                "prefix": prefix,
                "label": label,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "backends": [s.name for s in specs],
                "options": replay_options(options, [s.name for s in specs]),
            },
        )
    contexts = {
        spec.name: RunContext(
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
        for spec in specs
    }
    lock = threading.Lock()
    mode = delivery_mode(delivery, specs, manager, journal_obj is not None)
    slots: dict[str, BackendSlot] = {}
    workers: Mapping[str, Any] | None = None
    if mode == "process" and journal_obj is not None:
        try:
            workers = start_delivery_process(
                specs,
                contexts,
                journal=str(journal_obj.path),
                handle=handle,
                prefix=prefix,
                actions=actions,
                flush_interval=flush_interval,
                exit_timeout=lifecycle.exit_timeout(),
                # `tracking-core sync` waits for a delivery process finishing a dead writer's journal
                on_spawn=lambda pid: journal_obj.write_lines([{"t": "delivery", "pid": pid}]),
            ).workers
        except DeliveryUnavailable as exc:
            log.warning("%s; delivering on threads of this process instead", exc)
    if workers is None:
        slots, workers = local_workers(
            list(specs),
            manager,
            contexts,
            prefix=prefix,
            journal=journal_obj,
            lock=lock,
            flush_interval=flush_interval,
        )
    dispatcher = Dispatcher(dict(workers), journal_obj, lock, prefix, flush_interval)
    return slots, dispatcher, journal_obj


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
    open_timeout: float = DEFAULT_OPEN_TIMEOUT,
    flush_interval: float = DEFAULT_FLUSH_INTERVAL,
    journal: bool = True,
    export: bool = True,
    delivery: str | None = None,
) -> Run:
    """Open the job's run in every selected backend (call this once, in the driver).

    ``config`` (any host object; default ``args``) is logged as the launch config. Backends are
    chosen by ``backends``, else ``args.tracking_backends``, ``$TRACKING_CORE_BACKENDS``, the
    host's own switches, then the embedded default. ``handle`` resumes an existing run. A backend
    that cannot be reached within ``open_timeout`` stays in the run: its records are journaled
    and delivered when it comes back (or by ``tracking-core sync``). The handle is saved in the
    run directory and, with ``export``, put in ``$TRACKING_CORE_RUN`` and on
    ``args.tracking_run`` so that child processes can attach. ``delivery`` (``process`` or
    ``thread``; default ``args.tracking_delivery``, ``$TRACKING_CORE_DELIVERY``, else
    ``process`` where possible) says where the trackers' client code runs: see
    :mod:`tracking_core.remote`.
    """
    manager = get_plugin_manager()
    resumed = RunHandle.parse(handle) if handle is not None else None
    if resumed is not None:
        names = list(resumed.backends)
        source = "the resumed run handle"
    else:
        names, source = resolve_backend_names(args=args, explicit=backends, manager=manager)
    specs = manager.select(names)
    if resumed is not None:
        run_handle = resumed
    else:
        rid = run_id or new_run_id()
        run_handle = RunHandle(
            run_id=rid,
            name=name or rid,
            tracking_dir=str(Path(opts.tracking_dir(args, tracking_dir)).absolute()),
            key_style=opts.key_style(args, key_style),
        )
    actions = {}
    for spec in specs:
        entry = run_handle.backends.get(spec.name) or {}
        attach_existing = resumed is not None and entry and not entry.get("pending")
        actions[spec.name] = "attach" if attach_existing else "open"
    slots, dispatcher, journal_obj = _build(
        specs,
        manager,
        handle=run_handle,
        primary=True,
        role=None,
        rank=decide_writer().rank,
        prefix="",
        options=_options_of(args, options),
        tags=tags or {},
        resume=resumed is not None,
        flush_interval=flush_interval,
        journal=journal,
        delivery=delivery or getattr(args, "tracking_delivery", None),
        actions=actions,
    )
    payloads: dict[str, dict[str, Any]] = {}
    # An open that succeeds after the wait below gave up must not be overwritten by the
    # "pending" entry, nor go unsaved: the two sides decide under this lock.
    decided = threading.Lock()
    for spec_name, worker in dispatcher.workers.items():

        def on_success(result: Any, spec_name: str = spec_name) -> None:
            with decided:
                run_handle.backends[spec_name] = json.loads(
                    json.dumps(dict(result or {}), default=str)
                )
                payloads[spec_name]["opened"] = True
                late = payloads[spec_name].get("late")
            if late:
                run_handle.save()
                log.warning("backend %r is reachable now: the run is open there", spec_name)

        payload: dict[str, Any] = {"first": threading.Event(), "on_success": on_success}
        payloads[spec_name] = payload  # before the worker can call on_success
        if actions[spec_name] == "attach":
            payload["kwargs"] = attach_arguments(run_handle, spec_name)
        else:
            payload["kwargs"] = dict
        worker.submit(actions[spec_name], payload)
    deadline = time.monotonic() + open_timeout
    for spec_name, payload in payloads.items():
        payload["first"].wait(max(0.0, deadline - time.monotonic()))
        with decided:
            if payload.get("opened"):
                continue
            payload["late"] = True
            run_handle.backends[spec_name] = {"pending": True}
            log.warning(
                "backend %r could not %s the run yet (see the warning above); it stays in the "
                "run: records are journaled and delivered when it is back, or by "
                "`tracking-core sync`",
                spec_name,
                "resume" if resumed else "open",
            )
    run = Run(
        run_handle,
        primary=True,
        role=None,
        slots=slots,
        dispatcher=dispatcher,
        journal=journal_obj,
        args=args,
    )
    path = run_handle.save()
    log.info(
        "tracking-core run %s %s with %s (selected by %s); run handle saved to %s",
        run_handle.run_id,
        "resumed" if resumed else "started",
        ", ".join(dispatcher.workers) or "no backend",
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
    journal: bool = True,
    delivery: str | None = None,
) -> Run | NullRun:
    """Attach this process to the job's run as ``role`` (never a collective call).

    The handle comes from ``handle``, ``args.tracking_run`` or ``$TRACKING_CORE_RUN``. Only the
    role's writer rank (see :mod:`tracking_core.writer`; ``writer`` overrides) gets a live run;
    the others get a :class:`NullRun`. The writer logs the role's config: ``config`` merged with
    what every collector returns for the role (``collect=False`` skips the collectors).
    Metric names get ``metric_prefix`` (default ``"<role>/"``; ``""`` passes names through).
    ``delivery`` is as for :func:`start_run`.
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
    slots, dispatcher, journal_obj = _build(
        specs,
        manager,
        handle=run_handle,
        primary=False,
        role=role,
        rank=decision.rank,
        prefix=metric_prefix if metric_prefix is not None else f"{role}/",
        options=_options_of(args, options),
        tags={},
        resume=False,
        flush_interval=flush_interval,
        journal=journal,
        delivery=delivery or getattr(args, "tracking_delivery", None),
        actions={spec.name: "attach" for spec in specs},
    )
    for spec_name, worker in dispatcher.workers.items():
        worker.submit("attach", {"kwargs": attach_arguments(run_handle, spec_name)})
    run = Run(
        run_handle,
        primary=False,
        role=role,
        slots=slots,
        dispatcher=dispatcher,
        journal=journal_obj,
        args=args,
    )
    log.info(
        "tracking-core: process %s attached to run %s as role %r (%s; host %s)",
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
        from .config import to_plain

        plain, _ = to_plain(config)
        return plain
