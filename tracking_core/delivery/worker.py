"""One backend's delivery: its instance (a plugin, called at its own hook implementations) and the thread that feeds it.

A :class:`BackendWorker` opens (or attaches to) the run in its backend, then takes the journal's
records in order (:mod:`.batches`) and hands them over: rows as :func:`log_metrics`, config
sections as :func:`log_config`, the end as :func:`close_run` (with the status :mod:`.verdict`
judges). Each delivered batch moves the backend's acknowledgement forward.

When a call fails it is retried with a growing delay (0.1 s up to
:data:`~.failures.MAX_RETRY_DELAY`); after :data:`~.failures.BREAKER_THRESHOLD` failures in a
row the backend's **circuit is open** (:class:`~.failures.Breaker`): it is probed once per delay
while its records wait in the journal. A batch that keeps failing is isolated
(:mod:`.refusals`). Between batches the writer's state goes to the job's writer registry
(:class:`~.writers.Registration`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from pluggy import HookImpl

from .. import lifecycle, settings
from ..context import RunContext
from ..errors import RunNotOpenYet
from ..plugins import PluginManager
from ..records import RunStatus
from ..registry import BackendSpec
from . import kinds
from .batches import Batches
from .entries import End, Entry
from .failures import MAX_RETRY_DELAY, Breaker
from .journal import Acks
from .plan import BackendPlan, Plan
from .progress import BackendProgress
from .refusals import UNSUPPORTED, Refusals, section_of
from .stream import Stream
from .verdict import CloseVerdict
from .writers import Counts, Registration, owing_text

log = logging.getLogger("tracking_core.delivery")
trace = logging.getLogger("tracking_core.trace")

#: Failures of one batch after which its records are tried one by one (before the breaker
#: opens: a batch the tracker refuses is bad data, not a tracker that is down).
ISOLATE_AFTER = 2
#: How often an attach waiting for the primary's open is tried again, and after how long the
#: wait is reported as a failure.
NOT_OPEN_POLL = 1.0
NOT_OPEN_GRACE = 60.0
#: How long a drain waits for the primary to open the run before it counts the tracker as down.
NOT_OPEN_PATIENCE = 3.0


class BackendSlot:
    """A selected backend in one process: built on first use, registered as a plugin under its
    name for the life of the run (pluggy validates its hooks there), and called at its own hook
    implementations only, so that a call reaches no other backend (traced with
    ``TRACKING_CORE_TRACE_PLUGINS``).

    ``on_call(backend, hook)`` is told before each call into the tracker's code (building its
    instance included) and ``on_call(backend, None)`` after it: a delivery process says so to the
    process that started it, which then knows whose code was running if the process dies."""

    def __init__(
        self,
        spec: BackendSpec,
        context: RunContext,
        manager: PluginManager,
        on_call: Callable[[str, str | None], None] | None = None,
    ) -> None:
        self.spec = spec
        self.context = context
        self.manager = manager
        self.on_call = on_call
        self.instance: Any = None
        self.plugin_name: str | None = None
        self._impls: dict[str, HookImpl] | None = None
        self._traced = bool(settings.get(settings.TRACE_PLUGINS))  # read once, not at every call

    def _hooks(self) -> dict[str, HookImpl]:
        """Its hook implementations, the instance built on first use."""
        if self._impls is None:
            self._impls = self._watched(self._build, "constructor")
        return self._impls

    def _build(self) -> dict[str, HookImpl]:
        instance = self.spec.resolve_factory()(self.context)
        name = self.spec.name
        n = 1
        while self.manager.pm.get_plugin(name) is not None or name in self.manager.plugins:
            n += 1
            name = f"{self.spec.name}#{n}"
        if not self.manager.register(instance, name):
            info = self.manager.plugins.pop(name, None)
            raise TypeError(
                f"backend {self.spec.name!r} (plugin {self.spec.plugin!r}) built an invalid "
                f"instance: {info.error if info else 'rejected by the plugin manager'}"
            )
        impls = {
            caller.name: impl
            for caller in self.manager.pm.get_hookcallers(instance) or ()
            for impl in caller.get_hookimpls()
            if impl.plugin is instance and not (impl.hookwrapper or impl.wrapper)
        }
        self.instance, self.plugin_name = instance, name
        return impls

    def call(self, hook: str, **kwargs: Any) -> Any:
        """Call this backend's implementation of ``hook`` with the arguments it names (None
        where it has none)."""
        impl = self._hooks().get(hook)
        if impl is None:
            return None
        args = [kwargs[name] for name in impl.argnames]
        if self._traced:
            trace.info("%s [hook] backend %s: %s", hook, self.plugin_name, ", ".join(impl.argnames))
        result = self._watched(lambda: impl.function(*args), hook)
        if self._traced:
            trace.info("finish %s --> %.200r", hook, result)
        return result

    def _watched(self, call: Callable[[], Any], what: str) -> Any:
        if self.on_call is None:
            return call()
        self.on_call(self.spec.name, what)
        try:
            return call()
        finally:
            self.on_call(self.spec.name, None)

    def implements(self, hook: str) -> bool:
        """Whether this backend has an implementation of ``hook`` (none when it cannot be built)."""
        try:
            return hook in self._hooks()
        except Exception:  # noqa: BLE001 - its constructor failed: it has no hooks then
            return False

    def release(self) -> None:
        """Unregister the instance: a backend is a plugin only for the life of its run."""
        if self.plugin_name is not None:
            self.manager.unregister(self.plugin_name)
            self.plugin_name = None


class BackendWorker:
    """Delivers one backend's share of a journal on its own daemon thread (see the module doc),
    as ``backend`` of ``plan`` says: ``open`` (the primary opens the run at the backend's
    ``entry``, its target) or ``attach`` (``entry`` is the backend's entry in the run handle);
    ``on_opened`` hears the result."""

    def __init__(
        self,
        slot: BackendSlot,
        plan: Plan,
        backend: BackendPlan,
        stream: Stream,
        acks: Acks,
        on_opened: Callable[[str, Any], None] | None = None,
    ) -> None:
        self.slot = slot
        self.plan = plan
        self.backend = backend
        self.acks = acks
        self.on_opened = on_opened
        self.breaker = Breaker(slot.spec.name)
        self.refusals = Refusals(self)
        self.registration = Registration(slot, self.breaker, backend.writer)
        self._stop = threading.Event()
        self.verdict = CloseVerdict(self.registration, self._stop)
        self._progress = threading.Condition()
        self.batches = Batches(stream, lambda: self.progress, self._progress, slot.spec.max_batch, slot.spec.batch_interval)
        self.ready = False
        self.owed_sections: dict[int, str] = {}
        self._probe_now = False
        self._waiting_since: float | None = None
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tracking-core-{self.name}", daemon=True)

    @property
    def name(self) -> str:
        return self.slot.spec.name

    @property
    def context(self) -> RunContext:
        return self.slot.context

    @property
    def prefix(self) -> str:
        return self.plan.prefix

    @property
    def stream(self) -> Stream:
        return self.batches.stream

    @property
    def circuit_open(self) -> bool:
        return self.breaker.open

    @property
    def progress(self) -> BackendProgress:
        return self.acks.progress[self.name]

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- waiting for it ---------------------------------------------------------------------
    def drain(self, target_n: int, deadline: float | None, *, wait_for_open: bool = False) -> bool:
        """Wait until every record up to ``target_n`` is done; False at ``deadline``, or as soon
        as the backend is down (its circuit open) and one more probe since this call failed.
        While the primary has not opened the run here yet, a drain gives it a little patience,
        or (``wait_for_open``: a flush, whose records have nowhere else to go) up to ``deadline``."""
        with self._progress:
            self.batches.urgent += 1
            probe_mark = self.breaker.attempts
            self._probe_now = True
            self._wake.set()
            try:
                while not self.progress.reached(target_n) or self.batches.retrying_owed():
                    remaining = 0.05 if deadline is None else deadline - time.monotonic()
                    if (
                        remaining <= 0
                        or (self._stop.is_set() and not self._thread.is_alive())
                        or self._gave_up(probe_mark, wait_for_open)  # down (or not open yet), and probed once since
                    ):
                        return False
                    self._progress.wait(min(0.05, remaining))
                return True
            finally:
                self.batches.urgent -= 1

    def _gave_up(self, probe_mark: int, wait_for_open: bool) -> bool:
        """Whether a drain stops waiting: the tracker is down (its circuit open, or it cannot
        be opened) and was probed once since the drain began. Waiting for the primary to open
        the run is given a little patience first (the primary may just be slower), or, with
        ``wait_for_open``, as long as the drain's deadline allows."""
        if self.breaker.attempts <= probe_mark or self.refusals.judging:
            return False
        if self.circuit_open:
            return True
        if self.ready:
            return False
        waiting = self._waiting_since
        if waiting is None:
            return True
        return not wait_for_open and time.monotonic() - waiting >= NOT_OPEN_PATIENCE

    # -- the thread -------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if not self._connect():
                return
            self.registration.opened(self._counts())
            while not self._stop.is_set():
                batch = self.batches.next()
                if not batch:
                    self._tick(caught_up=not self.batches.pending)
                    self._wake.wait(self.plan.poll)
                    self._wake.clear()
                    continue
                self._deliver(batch)
                self._tick(caught_up=False)
            if self.verdict.closing.is_set():
                self.registration.closed(self._counts(), complete=False)  # the close did not get through
        except Exception:  # noqa: BLE001 - the worker must never die silently
            log.exception("tracking-core's worker for %r hit an internal error", self.name)

    def _tick(self, caught_up: bool) -> None:
        if not self.circuit_open:
            self.registration.tick(lambda: self._counts(idle=caught_up), caught_up)

    def _counts(self, idle: bool = False) -> Counts:
        return self.batches.counts(idle, self.plan.poll)

    def _attach_entry(self) -> dict[str, Any]:
        """The entry to attach with: while the primary's open was not known when this process
        started, the saved run handle may know it by now; a backend without a target has
        nothing to attach to until then (raises: the attach is retried)."""
        b = self.backend
        if b.pending and self.plan.handle_file:
            from ..handle import RunHandle

            try:
                saved = RunHandle.parse(Path(self.plan.handle_file))
            except ValueError:
                saved = None
            if saved is not None and self.name not in saved.pending and self.name in saved.backends:
                self.backend = b = replace(b, entry=dict(saved.backends[self.name]), pending=False)
            elif not b.entry:
                raise RunNotOpenYet(
                    f"the run is not open in {self.name!r} yet (the primary has not reached it); "
                    "records wait in the journal"
                )
        return b.entry

    def _connect(self) -> bool:
        hook = "open_run" if self.backend.action == "open" else "attach_run"
        delay = 0.1
        while not self._stop.is_set():
            try:
                where = {"target": self.backend.entry} if hook == "open_run" else {"attach": self._attach_entry()}
            except RunNotOpenYet as exc:
                ok, result = False, exc
                self._not_open(hook, exc)
            else:
                ok, result = self.attempt(hook, **where, run=self.context)
            if ok:  # ready since the call returned (see attempt)
                self._waiting_since = None
                # A tracker in this process (thread delivery) registers its own exit teardown
                # when it opens: ours must still run first.
                lifecycle.exit_hook_last()
                if self.on_opened is not None and result is not None:
                    self.on_opened(self.name, result)
                return True
            longest = NOT_OPEN_POLL if isinstance(result, RunNotOpenYet) else MAX_RETRY_DELAY
            self._sleep(min(delay, longest))
            delay = min(delay * 2, longest)
        return False

    def _not_open(self, hook: str, exc: RunNotOpenYet) -> None:
        """The primary has not opened the run here yet: a wait, reported only when it lasts."""
        self._returned()
        if self._waiting_since is None:
            self._waiting_since = time.monotonic()
        elif time.monotonic() - self._waiting_since > NOT_OPEN_GRACE:
            self.breaker.record(hook, exc)

    def _sleep(self, delay: float) -> None:
        """Back off; a drain that starts while the circuit is open gets its probe at once."""
        deadline = time.monotonic() + delay
        while not self._stop.is_set():
            if self._probe_now and (self.circuit_open or not self.ready):
                self._probe_now = False
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wake.wait(remaining)
            self._wake.clear()

    # -- delivering -------------------------------------------------------------------------
    def attempt(self, hook: str, **kwargs: Any) -> tuple[bool, Any]:
        """One call; failures are counted, reported once per kind, and feed the breaker.

        ``attempts`` counts calls that have *returned* (a drain judges the tracker by them: a
        call still in flight says nothing yet), and a successful open or attach makes the
        backend ready in the same step."""
        try:
            result = self.slot.call(hook, **kwargs)
        except RunNotOpenYet as exc:
            self._not_open(hook, exc)
            return False, exc
        except Exception as exc:  # noqa: BLE001 - failure isolation
            self.breaker.record(hook, exc)
            if not self.refusals.judging:  # isolation judges the tracker's health itself
                self.breaker.failed()
            self._returned()
            return False, exc
        self._returned(ready=hook in ("open_run", "attach_run"))
        self.breaker.succeeded()
        return True, result

    def _returned(self, ready: bool = False) -> None:
        """A call returned (``ready``: an open or attach, which makes the backend ready in the
        same step); a drain waiting on the calls hears it."""
        with self._progress:
            self.ready = self.ready or ready
            self.breaker.attempts += 1
            self._progress.notify_all()

    def _deliver(self, batch: list[Entry]) -> None:
        delay = 0.1
        tries = 0
        while not self._stop.is_set():
            # From the try after which the batch is isolated, its failure is judged by the
            # isolation (bad data, or a tracker that is down), not counted by the breaker.
            judging = tries + 1 >= ISOLATE_AFTER and not kinds.of(batch[0]).closes
            self.refusals.judging = judging
            try:
                ok, result = self.call(batch)
                if ok:
                    self.took(batch, result)
                    return
                tries += 1
                if judging and self.refusals.isolate(batch):
                    return
            finally:
                self.refusals.judging = False
            self._sleep(delay)
            delay = min(delay * 2, MAX_RETRY_DELAY)

    def took(self, batch: list[Entry], result: Any) -> None:
        """The backend took ``batch`` (``result``: its call's): done, or set aside when it has no
        hook for its kind."""
        if result is UNSUPPORTED:
            self.refusals.unsupported(batch)
        else:
            self.done(batch, delivered=kinds.count(batch))

    def records(self, batch: list[Entry]) -> list[Any]:
        kind = kinds.of(batch[0])
        return [r for e in batch for r in kind.records(e, self.prefix, self.context.role)]

    def call(self, batch: list[Entry]) -> tuple[bool, Any]:
        """Hand a batch to the backend through its kind's hook (see :mod:`.kinds`): the end
        closes the run; an optional kind's hook the backend lacks is replaced by its fallback."""
        kind = kinds.of(batch[0])
        if kind.closes:
            return self._close(cast(End, batch[0]))
        try:
            records = self.records(batch)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return False, exc  # a damaged entry: isolated and counted like a refused one
        if kind.hook is None:
            return True, None  # a record kind this version does not know: nothing to deliver
        if kind.optional and not self.slot.implements(kind.hook):
            return self.refusals.fall_back(kind, records[0])
        return self.attempt(kind.hook, **kind.arguments(records), run=self.context)

    def _close(self, entry: End) -> tuple[bool, Any]:
        """The run's end: a secondary detaches; a primary closes with the status its verdict
        gives. The writer's final state is published before the end is acknowledged."""
        meant = RunStatus(entry.status or RunStatus.KILLED.value)
        # A secondary only detaches.
        status = self.verdict.judge(meant, float(entry.timestamp or time.time())) if self.context.primary else RunStatus.FINISHED
        ok, result = self.attempt("close_run", status=status, run=replace(self.context, ended_at=entry.timestamp))
        if ok:
            owing = self.verdict.owing
            extra = {"incomplete": {k: owing_text(e) for k, e in owing.items()}, "intended_status": meant.value} if owing else {}
            self.registration.closed(self._counts(), complete=not self.progress.owes_config(), **extra)
        return ok, result

    def done(self, batch: list[Entry], delivered: int = 0, rejected: int = 0, owed: bool = False) -> None:
        progress = self.progress
        numbers = {e.n for e in batch}
        still_owed = [n for n in progress.owed if n not in numbers]
        if owed:
            still_owed += sorted(numbers)
        # Config sections delivered, counted apart from values (as the summary counts those owed).
        config = kinds.of(batch[0]).owed
        configs = len(numbers) if not (delivered or rejected or owed) and config else 0
        # Saved at once, not at the next housekeeping: a delivery process killed right after a
        # delivery must not send it again. A drain sees the progress only once it is saved.
        with self._progress:
            self.acks.update(
                self.name,
                n=max(progress.n, batch[-1].n),
                delivered=progress.delivered + delivered,
                rejected=progress.rejected + rejected,
                owed=still_owed,
                configs=progress.configs + configs,
            )
            self.batches.done(batch)
            for n in numbers:
                if owed and config:
                    self.owed_sections[n] = str(section_of(batch[0]))
                elif not owed:
                    self.owed_sections.pop(n, None)
            self.acks.save()
            self._progress.notify_all()

    def report(self) -> dict[str, Any]:
        """This backend's counters for the summary (plain data: it crosses processes)."""
        return self.progress.report(
            self.owed_sections, failures=dict(self.breaker.counts), ready=self.ready, circuit_open=self.circuit_open
        )
