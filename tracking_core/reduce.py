"""Every rank counts: values reduced exactly across a role's ranks, and each rank's phase times.

On every rank of a role, ``log_metrics`` takes :class:`Mean`, :class:`Sum`, :class:`Max`,
:class:`Min` and :class:`Quantiles` values beside plain ones, and ``timer(phase, step=)`` times
a phase. The training thread only appends the call to a deque. A background thread per attached
process (its :class:`Gatherer`) packs a step's partials once the rank moves past that step, the
step is :data:`IDLE`, or the rank flushes or finishes, and pushes them as one message onto a queue in the job's c10d store, the
store :mod:`tracking_core.attendance` announces in: no collective, nothing another rank waits for.
The writer's gatherer pops that queue, waits for a step's other ranks at most ``REDUCE_WAIT``
seconds after its first message (a rank that published a later step skipped it), reduces, and
logs the values through its own run, so every tracker gets them: each reduced value keeps its
key, and ``<key>/ranks`` says how many ranks it covers where not all did. Phase spans become
``perf/<phase>/{max,mean,min,slowest_rank}`` and one Chrome-trace file per role, delivered as an
artifact at the writer's finish.

Which ranks: the ``group`` given to ``attach`` (its rank 0 writes); else, with Megatron's parallel
state initialised, the data-parallel group with context parallelism (tensor-parallel rank 0 of
the last pipeline stage publishes; the other ranks' reducer values are replicas or not final, and
are left out); else the role's ``torch.distributed`` world. Without a store a process reduces over
itself alone. A rank's steps must not go back on one step axis.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import operator
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import settings
from .attendance import _store as job_store
from .attendance import stopping, store_thread
from .errors import WarnOnce
from .names import path_part

log = logging.getLogger("tracking_core.reduce")

#: The role's queue in the job's store; ``leader``: the global rank of its group's rank 0.
KEY = "tracking_core/reduce/{run_id}/{role}/{leader}"
#: A rank keeps up to this many values of a Quantiles key exactly; past it, a sketch.
EXACT = 4096
#: The sketch's relative accuracy: each quantile is within 1% of the exact order statistic.
ALPHA = 0.01
_GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(_GAMMA)
#: Buckets per sign at most; past it the smallest magnitudes merge (their accuracy is lost first).
MAX_BUCKETS = 2048
QUANTILES = {"p5": 0.05, "p50": 0.5, "p95": 0.95}
POLL = 0.1
#: A step this rank has added nothing to for this long (seconds) is published without waiting for
#: the rank to move past it: a rank killed after its last step keeps that step.
IDLE = 1.0
#: The latest steps whose logged keys the writer keeps: a step's later keys are logged beside
#: them; an older step's late message is dropped.
RECENT = 1024
#: Spans kept for the trace file, at most (later ones are counted, not kept).
MAX_SPANS = 1_000_000


class Reducer:
    """A value to reduce across the role's ranks; converted to float in the background."""

    __slots__ = ("value", "weight")
    op = ""
    #: Set once any reducer is made: until then ``log_metrics`` does not look for them.
    made = False

    def __init__(self, value: Any, weight: Any = 1.0) -> None:
        self.value = value
        self.weight = weight
        if not Reducer.made:  # a class attribute set once: setting it again would cost each call
            Reducer.made = True


class Mean(Reducer):
    """Σ(value·weight) / Σweight over the ranks that reported (weight 1 by default)."""

    __slots__ = ()
    op = "mean"


class Sum(Reducer):
    __slots__ = ()
    op = "sum"

    def __init__(self, value: Any) -> None:
        self.value = value
        self.weight = 1.0
        if not Reducer.made:
            Reducer.made = True


class Max(Sum):
    __slots__ = ()
    op = "max"


class Min(Sum):
    __slots__ = ()
    op = "min"


class Quantiles(Sum):
    """Many values (a list, array or tensor, copied here): ``<key>/p5``, ``p50``, ``p95``,
    ``mean``, ``min``, ``max`` over every rank's values. Exact up to :data:`EXACT` values per
    rank; past it each quantile is within :data:`ALPHA` (relative) of the exact order
    statistic x[⌊q·(n−1)⌋]; mean, min and max stay exact. Non-finite values are left out."""

    __slots__ = ()
    op = "q"

    def __init__(self, values: Any) -> None:
        kind = type(values)
        if kind is list or kind is tuple:  # the common case, without the lookups below
            self.value = tuple(values)
        else:  # an array or a tensor copied (a tensor stays on its device), any iterable a tuple
            from .delivery.kinds import hold_values

            self.value = hold_values(values)
        self.weight = 1.0
        if not Reducer.made:
            Reducer.made = True


# -- partials: what one rank sends for a key, and how partials merge -----------------------------
#
# A partial is [op, *fields]: "mean" [Σ value·weight, Σ weight]; "sum", "max", "min" [value];
# "q" [count, Σ values, min, max, the exact values or None, the sketch or None].

#: How each field of an op's partial merges with another's (across ranks, ``add`` is ``fsum``).
_MERGE: dict[str, tuple[Callable[..., Any], ...]] = {
    "mean": (operator.add, operator.add),
    "sum": (operator.add,),
    "max": (max,),
    "min": (min,),
    "q": (operator.add, operator.add, min, max),
}


def _floats(values: Any) -> list[float]:
    items = values.tolist() if hasattr(values, "tolist") else values
    if not isinstance(items, (list, tuple)):  # a 0-d array's one value
        items = [items]
    return [x for x in map(float, items) if math.isfinite(x)]


def _sketch(values: Iterable[float]) -> list[Any]:
    """[positive buckets, negative buckets, zeros]: bucket i holds |x| in (γ^(i−1), γ^i]."""
    xs = list(values)
    return [_buckets(x for x in xs if x > 0), _buckets(-x for x in xs if x < 0), xs.count(0)]


def _buckets(magnitudes: Iterable[float]) -> dict[str, int]:
    return _collapse(Counter(str(math.ceil(math.log(x) / _LOG_GAMMA)) for x in magnitudes))


def _collapse(side: dict[str, int]) -> dict[str, int]:
    if len(side) > MAX_BUCKETS:
        keys = sorted(side, key=int)
        cut = len(keys) - MAX_BUCKETS
        side[keys[cut]] += sum(side.pop(k) for k in keys[:cut])
    return side


def _sketched(p: list[Any]) -> list[Any]:
    """A Quantiles partial's sketch (made from its exact values where it has none)."""
    return p[6] if p[6] is not None else _sketch(p[5])


def _merge_sketch(into: list[Any], other: list[Any]) -> list[Any]:
    for s in (0, 1):
        for i, n in other[s].items():
            into[s][i] = into[s].get(i, 0) + n
        _collapse(into[s])
    into[2] += other[2]
    return into


def _sketch_quantile(sk: list[Any], count: float, q: float) -> float:
    buckets = sorted(
        [(-_value(int(i)), n) for i, n in sk[1].items()]
        + [(0.0, sk[2])]
        + [(_value(int(i)), n) for i, n in sk[0].items()]
    )
    seen = 0
    for value, n in buckets:
        seen += n
        if seen > int(q * (count - 1)):
            return value
    return buckets[-1][0]


def _value(i: int) -> float:
    return 2 * _GAMMA**i / (_GAMMA + 1)


def _exact_quantile(xs: list[float], q: float) -> float:
    """numpy's default (linear) quantile of sorted ``xs``."""
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def _partial(r: Reducer) -> list[Any] | None:
    """One reducer value as a partial; None where it adds nothing (no finite value of a
    Quantiles; a NaN of a Max or Min, which a Sum keeps, as one process would)."""
    if r.op == "q":
        xs = _floats(r.value)
        return ["q", len(xs), math.fsum(xs), min(xs), max(xs), xs, None] if xs else None
    value = float(r.value)
    if r.op == "mean":
        weight = float(r.weight)
        return ["mean", value * weight, weight] if weight != 0 else ["mean", 0.0, 0.0]  # even a NaN
    return None if r.op != "sum" and math.isnan(value) else [r.op, value]


def _fold(into: dict[str, list[Any]], key: str, p: list[Any]) -> None:
    """Merge partial ``p`` into this rank's partial for ``key`` (one of another op is left out);
    past :data:`EXACT` values a Quantiles partial keeps a sketch instead."""
    q = into.setdefault(key, p)
    if q is not p and q[0] == p[0]:
        for i, merge in enumerate(_MERGE[p[0]], 1):
            q[i] = merge(q[i], p[i])
        if p[0] == "q" and q[6] is None and p[6] is None:
            q[5] += p[5]
        elif p[0] == "q":
            q[5], q[6] = None, _merge_sketch(_sketched(q), _sketched(p))
    if q[0] == "q" and q[6] is None and len(q[5]) > EXACT:
        q[5], q[6] = None, _sketch(q[5])


def add(partials: dict[str, list[Any]], key: str, r: Reducer) -> None:
    """Fold one reducer value into this rank's partial for ``key``."""
    p = _partial(r)
    if p is not None:
        _fold(partials, key, p)


def reduce(by_rank: Mapping[int, Mapping[str, list[Any]]], size: int) -> dict[str, float]:
    """The reduced values of one step from each rank's partials (global rank -> key -> partial);
    ``<key>/ranks`` where fewer than ``size`` ranks gave ``key``."""
    keys: dict[str, list[list[Any]]] = {}
    for partials in by_rank.values():
        for key, p in partials.items():
            keys.setdefault(key, []).append(p)
    out: dict[str, float] = {}
    for key, ps in keys.items():
        op = ps[0][0]
        ps = [p for p in ps if p[0] == op]
        total = [
            math.fsum(p[i] for p in ps) if merge is operator.add else merge(p[i] for p in ps)
            for i, merge in enumerate(_MERGE[op], 1)
        ]
        if op == "q":
            out.update(_quantiles(key, ps, *total))
        elif op != "mean":
            out[key] = total[0]
        elif total[1] != 0:
            out[key] = total[0] / total[1]
        if len(ps) < size:
            out[f"{key}/ranks"] = float(len(ps))
    return out


def _quantiles(
    key: str, ps: list[list[Any]], count: float, total: float, lo: float, hi: float
) -> dict[str, float]:
    out = {f"{key}/mean": total / count, f"{key}/min": lo, f"{key}/max": hi}
    exact = all(p[6] is None for p in ps)
    if exact:
        xs = sorted(x for p in ps for x in p[5])
    else:
        sk: list[Any] = [{}, {}, 0]
        for p in ps:
            _merge_sketch(sk, _sketched(p))
    for name, q in QUANTILES.items():
        out[f"{key}/{name}"] = _exact_quantile(xs, q) if exact else _sketch_quantile(sk, count, q)
    return out


def phases(by_rank: Mapping[int, Mapping[str, float]], size: int) -> dict[str, float]:
    """``perf/<phase>/max|mean|min|slowest_rank`` (seconds; the slowest's global rank)."""
    by_phase: dict[str, dict[int, float]] = {}
    for rank, spent in by_rank.items():
        for phase, seconds in spent.items():
            by_phase.setdefault(phase, {})[rank] = seconds
    out: dict[str, float] = {}
    for phase, times in by_phase.items():
        slowest = max(times, key=times.__getitem__)
        key = f"perf/{phase}"
        out.update({
            f"{key}/max": times[slowest], f"{key}/mean": math.fsum(times.values()) / len(times),
            f"{key}/min": min(times.values()), f"{key}/slowest_rank": float(slowest),
        })  # fmt: skip
        if len(times) < size:
            out[f"{key}/ranks"] = float(len(times))
    return out


# -- where a role's ranks meet --------------------------------------------------------------------


def _layout(run: Any) -> tuple[Any, str | None, int, int, bool]:
    """(store, queue key, this process's global rank, the group's size, publishes): no store,
    or the primary (no role), is a group of one."""
    store = job_store() if run.role is not None else None
    if store is None:
        return None, None, 0, 1, True
    dist = sys.modules["torch.distributed"]
    rank = int(dist.get_rank())
    group, publishes = (run.group, True) if run.group is not None else _megatron_group()
    ranks = dist.get_process_group_ranks(group) if group is not None else range(dist.get_world_size())
    clone = getattr(store, "clone", None)
    try:
        store = clone() if clone is not None else store
        store.set_timeout(__import__("datetime").timedelta(seconds=10))
    except Exception:  # noqa: BLE001 - the job's own connection then, with its timeout
        pass
    return (
        store,
        KEY.format(run_id=run.run_id, role=run.role, leader=ranks[0]),
        rank,
        len(ranks),
        publishes,
    )


def _megatron_group() -> tuple[Any, bool]:
    """Megatron's data-parallel group with context parallelism, where its state is initialised;
    whether this rank's values count (tensor-parallel rank 0 on the last pipeline stage)."""
    ps = sys.modules.get("megatron.core.parallel_state")
    try:
        if ps is None or not ps.model_parallel_is_initialized():
            return None, True
        counts = ps.get_tensor_model_parallel_rank() == 0 and ps.is_pipeline_last_stage(
            ignore_virtual=True
        )
        return ps.get_data_parallel_group(with_context_parallel=True), bool(counts)
    except Exception:  # noqa: BLE001 - an older or partial Megatron: the world
        return None, True


class _Step:
    """A step's values: this rank's own not published yet (key -> partial, phase -> seconds, its
    spans; ``when`` it last added to them), or the writer's of each rank (rank -> those partials,
    rank -> those times; ``when`` the first came)."""

    __slots__ = ("when", "metrics", "times", "spans")

    def __init__(self) -> None:
        self.when = time.monotonic()
        self.metrics: dict[Any, Any] = {}
        self.times: dict[Any, Any] = {}
        self.spans: list[list[Any]] = []


class Gatherer:
    """One attached process's side of its role's reduction (see the module's docstring)."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.items: deque[tuple[Any, ...]] = deque()
        self.writer = bool(run.is_writer)
        self.wait = settings.reduce_wait()
        self.store, self.key, self.rank, self.size, self.publishes = _layout(run)
        self.origin_wall, self.origin = time.time(), time.perf_counter()
        self.open: dict[Any, dict[int, _Step]] = {}  # this rank's steps not published yet, per axis
        self.pending: dict[tuple[Any, int], _Step] = {}  # the writer's steps not logged yet
        self.latest: dict[Any, dict[int, int]] = {}  # axis -> rank -> its latest published step
        self.logged: dict[tuple[Any, int], set[str]] = {}  # the RECENT latest logged steps' keys
        self.floor: dict[Any, int] = {}  # axis -> the latest step logged before those
        self.spans: list[tuple[int, str, int, float, float]] = []
        self.origins: dict[int, float] = {}
        self._say = WarnOnce(log)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.closed = False
        self.thread = store_thread(self._loop, (), "tracking-core-reduce")
        atexit.register(self.close, 2.0)

    # -- the background thread -----------------------------------------------------------------
    def _loop(self) -> None:
        while not self.stop.wait(POLL):
            try:
                with self.lock:
                    if self.stop.is_set() or stopping.is_set():  # exiting: the close ticks last
                        return
                    self._tick()
            except Exception as exc:  # noqa: BLE001 - never into the training loop
                self._say(
                    "tick",
                    "tracking-core: reducing role %r's values failed (%s: %s)",
                    self.run.role,
                    type(exc).__name__,
                    exc,
                )

    def _tick(self, publish_all: bool = False, force: bool = False) -> None:
        while self.items:
            self._take(*self.items.popleft())
        idle = time.monotonic() - (0.0 if publish_all else IDLE)
        for axis, parts in self.open.items():
            for step in sorted(parts):
                if parts[step].when <= idle:
                    self._publish(axis, step, parts.pop(step))
        if self.writer:
            self._receive_all()
            self._close_due(force)

    def _take(self, axis: Any, step: Any, payload: Any) -> None:
        if isinstance(payload, tuple):  # a timed span: (phase, start, end, timed) on perf_counter
            phase, start, end, timed = payload
            ts, dur = round((start - self.origin) * 1e6, 3), round((end - start) * 1e6, 3)
            if not timed:  # a phase the host timed itself: the writer's trace only
                if self.writer:
                    self._keep_spans(self.rank, self.origin_wall, step, [(phase, ts, dur)])
                return
            span = self._part(axis, step)
            span.times[phase] = span.times.get(phase, 0.0) + (end - start)
            span.spans.append([phase, ts, dur])
            return
        plain: dict[str, Any] = {}
        part = None if step is None else self._part(axis, step)
        for key, value in payload.items():
            if not isinstance(value, Reducer):
                plain[key] = value
            elif part is not None:
                try:
                    add(part.metrics, key, value)
                except (TypeError, ValueError) as exc:
                    self._say(
                        f"value:{key}",
                        "tracking-core: %r: %s is not a number (%s); left out",
                        key,
                        type(value).__name__,
                        exc,
                    )
            elif value.op != "q":  # no step to meet the other ranks at: this rank's own value
                self._say(
                    "step",
                    "tracking-core: a reduced value needs log_metrics(..., step=): without one %r is this rank's own",
                    key,
                )
                plain[key] = value.value
        if plain and self.writer:
            self.run.log_metrics(plain, step=step, step_key=axis)

    def _part(self, axis: Any, step: int) -> _Step:
        parts = self.open.setdefault(axis, {})
        for older in sorted(s for s in parts if s < step):  # this rank moved past them
            self._publish(axis, older, parts.pop(older))
        part = parts.setdefault(step, _Step())
        part.when = time.monotonic()
        return part

    def _publish(self, axis: Any, step: int, part: _Step) -> None:
        if not self.publishes:
            return
        msg = [self.rank, axis, step, part.metrics, part.times, part.spans, self.origin_wall]
        if self.writer:
            self._receive(msg)
            return
        if self.store is None:
            return  # a non-writer with no store: there is no one to send to
        try:
            self.store.queue_push(self.key, json.dumps(msg, separators=(",", ":")))
        except Exception as exc:  # noqa: BLE001 - a store gone: this rank's values are not counted
            self._say(
                "push",
                "tracking-core: could not publish role %r's step %s to the job's store (%s: %s)",
                self.run.role,
                step,
                type(exc).__name__,
                exc,
            )

    # -- the writer's side ---------------------------------------------------------------------
    def _receive_all(self) -> None:
        if self.store is None or self.size == 1:
            return
        try:
            for _ in range(self.store.queue_len(self.key)):
                self._receive(json.loads(self.store.queue_pop(self.key, False)))
        except Exception as exc:  # noqa: BLE001 - an empty queue raced, or a store gone
            if type(exc).__name__ != "QueueEmptyError":
                self._say(
                    "pop",
                    "tracking-core: could not read role %r's values from the job's store (%s: %s)",
                    self.run.role,
                    type(exc).__name__,
                    exc,
                )

    def _receive(self, msg: list[Any]) -> None:
        """A rank's message: [rank, axis, step, key -> partial, phase -> seconds, its spans, its
        clock origin's wall time]."""
        rank, axis, step, metrics, times, spans, origin = msg
        step = int(step)
        latest = self.latest.setdefault(axis, {})
        latest[rank] = max(step, latest.get(rank, step))
        self._keep_spans(rank, origin, step, spans)
        if step <= self.floor.get(axis, -math.inf) and (axis, step) not in self.logged:
            self._say(
                "late",
                "tracking-core: role %r: a rank's values for step %s arrived after that step was logged (over %s s late, or a step logged again): not counted",
                self.run.role,
                step,
                self.wait,
            )
            return
        entry = self.pending.setdefault((axis, step), _Step())
        into, spent = entry.metrics.setdefault(rank, {}), entry.times.setdefault(rank, {})
        for key, p in metrics.items():  # a rank may publish a step twice (a flush within it)
            _fold(into, key, p)
        for phase, seconds in times.items():
            spent[phase] = spent.get(phase, 0.0) + seconds

    def _keep_spans(self, rank: int, origin: float, step: int, spans: Iterable[Any]) -> None:
        """Spans of the trace file (at most :data:`MAX_SPANS`) and the rank's clock origin."""
        self.origins.setdefault(rank, origin)
        for phase, ts, dur in spans:
            if len(self.spans) < MAX_SPANS:
                self.spans.append((rank, phase, step, ts, dur))

    def _close_due(self, force: bool) -> None:
        now = time.monotonic()
        for (axis, step), entry in sorted(self.pending.items(), key=lambda kv: kv[0][1]):
            latest = self.latest.get(axis, {})
            heard = entry.metrics.keys() | {r for r, s in latest.items() if s > step}  # or skipped it
            if force or len(heard) >= self.size or now - entry.when >= self.wait:
                del self.pending[(axis, step)]
                self._log(axis, step, entry)

    def _log(self, axis: Any, step: int, entry: _Step) -> None:
        values = {**reduce(entry.metrics, self.size), **phases(entry.times, self.size)}
        logged = self.logged.pop((axis, step), set())
        again = sorted(values.keys() & logged)
        if again:
            self._say(
                "again",
                "tracking-core: role %r step %s: %s arrived after that step's value was logged (a key logged or a "
                "phase timed again over %s s after the step's last call): not counted (said once)",
                self.run.role, step, ", ".join(again[:5]), IDLE,
            )  # fmt: skip
            for k in again:
                del values[k]
        self.logged[(axis, step)] = logged | values.keys()
        if len(self.logged) > RECENT:
            (old_axis, old_step) = oldest = next(iter(self.logged))
            del self.logged[oldest]
            self.floor[old_axis] = max(old_step, self.floor.get(old_axis, old_step))
        if len(entry.metrics) < self.size:
            self._say(
                "incomplete", "tracking-core: role %r step %s: %d of %d ranks' values arrived within %s s; each value that "
                "covers fewer ranks has <key>/ranks beside it (said once)", self.run.role, step, len(entry.metrics), self.size, self.wait,
            )  # fmt: skip
        if values:
            self.run.log_metrics(values, step=step, step_key=axis)

    def _write_trace(self, deliver: bool) -> None:
        """The trace file, written anew (at each flush: a process killed later keeps it on its
        disk); ``deliver``: handed to the trackers as an artifact too (at the finish)."""
        if not self.spans:
            return
        start = min(self.origins.values())
        events: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": r, "args": {"name": f"rank {r}", "clock_origin_unix_s": o}}
            for r, o in sorted(self.origins.items())
        ]
        events += [
            {
                "name": phase, "ph": "X", "pid": rank, "tid": phase,
                "ts": ts + (self.origins[rank] - start) * 1e6, "dur": dur, "args": {"step": step},
            }
            for rank, phase, step, ts, dur in self.spans
        ]  # fmt: skip
        path = self.run.run_dir / f"trace-{path_part(self.run.role or 'primary', 'role')}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
        except OSError as exc:
            self._say("trace", "tracking-core: could not write the phase trace %s (%s)", path, exc)
            return
        if deliver:
            self.run.log_artifact(path, kind="trace")

    # -- flush and finish ----------------------------------------------------------------------
    def settle(self, timeout: float, final: bool = False) -> None:
        """Publish this rank's open steps; a writer then logs its pending steps once complete,
        at their bound, or at ``timeout`` (whichever first); ``final`` ends the gatherer."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self.lock:
            self._tick(publish_all=True)
        while self.writer and self.pending and time.monotonic() < deadline:
            time.sleep(POLL / 2)
            with self.lock:
                self._tick()
        if final:
            self.stop.set()
        with self.lock:
            if final:
                self._tick(publish_all=True, force=True)
            if self.writer:
                self._write_trace(deliver=final)
        if final and self.thread is not threading.current_thread():
            self.thread.join(2 * POLL)

    def close(self, timeout: float) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.settle(min(timeout, self.wait), final=True)
        except Exception as exc:  # noqa: BLE001 - never raise at finish or exit
            self._say(
                "close",
                "tracking-core: could not finish role %r's reductions (%s: %s)",
                self.run.role,
                type(exc).__name__,
                exc,
            )


# -- the training thread's side -------------------------------------------------------------------


def _gatherer(run: Any) -> Gatherer:
    g = run._gatherer
    if g is None:
        g = run._gatherer = Gatherer(run)
    return g


def take(run: Any, metrics: Mapping[str, Any], step: int | None, step_key: str | None) -> bool:
    """Whether ``metrics`` holds a reducer value: then the whole call goes to the role's gatherer
    (its plain values logged from there by the writer). Costs a plain call one attribute read
    until any reducer is made in the process."""
    if not Reducer.made:
        return False
    for value in metrics.values():
        if isinstance(value, Reducer):
            _gatherer(run).items.append((step_key, step, dict(metrics)))
            return True
    return False


class _Timer:
    __slots__ = ("items", "axis", "step", "phase", "start")

    def __init__(
        self, items: deque[tuple[Any, ...]], phase: str, step: int, axis: str | None
    ) -> None:
        self.items, self.phase, self.step, self.axis = items, phase, step, axis

    def __enter__(self) -> _Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.items.append((self.axis, self.step, (self.phase, self.start, time.perf_counter(), True)))


def timer(run: Any, phase: str, step: int, step_key: str | None = None) -> _Timer:
    """This rank's time in ``phase`` at ``step`` (perf_counter: nothing synchronises a device)."""
    return _Timer(_gatherer(run).items, str(phase), int(step), step_key)


def trace_span(run: Any, phase: str, seconds: float, step: int, step_key: str | None = None) -> None:
    """A phase of ``seconds`` that ended now, timed by the host (slime's ``perf/<phase>_time``):
    a span of the writer's trace file only (the host logs its own value; no ``perf/<phase>/*``
    series is added). Nothing on a rank that does not write."""
    if run.is_writer:
        end = time.perf_counter()
        _gatherer(run).items.append((step_key, int(step), (str(phase), end - float(seconds), end, False)))


def settle(run: Any, timeout: float | None, final: bool = False) -> None:
    """At flush (``final`` at finish): see :meth:`Gatherer.settle`. Nothing without reducers."""
    g = run._gatherer
    if g is None:
        return
    bound = min(g.wait, 5.0 if timeout is None else timeout / 4)
    if final:
        g.close(bound)
    else:
        g.settle(bound)
