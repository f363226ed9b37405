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
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
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


def _floats(values: Any) -> list[float]:
    tolist = getattr(values, "tolist", None)
    items = tolist() if tolist is not None else values
    if not isinstance(items, list):
        items = [items] if isinstance(items, (int, float)) else list(items)
    return [x for x in map(float, items) if math.isfinite(x)]


def _bucket(x: float) -> int:
    return math.ceil(math.log(x) / _LOG_GAMMA)


def _sketch(values: Iterable[float]) -> list[Any]:
    """[positive buckets, negative buckets, zeros]: bucket i holds |x| in (γ^(i−1), γ^i]."""
    pos: dict[str, int] = {}
    neg: dict[str, int] = {}
    zeros = 0
    for x in values:
        if x == 0:
            zeros += 1
            continue
        side = pos if x > 0 else neg
        i = str(_bucket(abs(x)))
        side[i] = side.get(i, 0) + 1
    return [_collapse(pos), _collapse(neg), zeros]


def _collapse(side: dict[str, int]) -> dict[str, int]:
    if len(side) > MAX_BUCKETS:
        keys = sorted(side, key=int)
        cut = len(keys) - MAX_BUCKETS
        side[keys[cut]] += sum(side.pop(k) for k in keys[:cut])
    return side


def _merge_sketch(into: list[Any], other: list[Any]) -> None:
    for s in (0, 1):
        for i, n in other[s].items():
            into[s][i] = into[s].get(i, 0) + n
        _collapse(into[s])
    into[2] += other[2]


def _sketch_quantile(sk: list[Any], count: int, q: float) -> float:
    target = int(q * (count - 1))
    seen = 0
    order = [(-_value(int(i)), n) for i, n in sorted(sk[1].items(), key=lambda kv: -int(kv[0]))]
    order += [(0.0, sk[2])] + [
        (_value(int(i)), n) for i, n in sorted(sk[0].items(), key=lambda kv: int(kv[0]))
    ]
    for value, n in order:
        seen += n
        if seen > target:
            return value
    return order[-1][0]


def _value(i: int) -> float:
    return 2 * _GAMMA**i / (_GAMMA + 1)


def _exact_quantile(xs: list[float], q: float) -> float:
    """numpy's default (linear) quantile of sorted ``xs``."""
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def add(partials: dict[str, list[Any]], key: str, r: Reducer) -> None:
    """Fold one reducer value into this rank's partial for ``key``."""
    op, p = r.op, partials.get(key)
    if op == "q":
        xs = _floats(r.value)
        if not xs:
            return
        if p is None:
            p = partials[key] = ["q", 0, 0.0, math.inf, -math.inf, [], None]
        p[1] += len(xs)
        p[2] += math.fsum(xs)
        p[3], p[4] = min(p[3], min(xs)), max(p[4], max(xs))
        if p[6] is None:
            p[5].extend(xs)
            if len(p[5]) > EXACT:
                p[5], p[6] = None, _sketch(p[5])
        else:
            _merge_sketch(p[6], _sketch(xs))
        return
    value = float(r.value)
    if op == "mean":
        weight = float(r.weight)
        if p is None:
            p = partials[key] = ["mean", 0.0, 0.0]
        if weight != 0:  # a rank with no data adds nothing, even a NaN
            p[1] += value * weight
            p[2] += weight
    elif op != "sum" and math.isnan(value):
        return  # max and min leave a NaN out (a sum keeps it, as one process would)
    elif p is None:
        partials[key] = [op, value]
    else:
        p[1] = p[1] + value if op == "sum" else (max if op == "max" else min)(p[1], value)


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
        if op == "mean":
            den = math.fsum(p[2] for p in ps)
            if den != 0:
                out[key] = math.fsum(p[1] for p in ps) / den
        elif op == "sum":
            out[key] = math.fsum(p[1] for p in ps)
        elif op in ("max", "min"):
            out[key] = (max if op == "max" else min)(p[1] for p in ps)
        elif op == "q":
            out.update(_quantiles(key, ps))
        if len(ps) < size:
            out[f"{key}/ranks"] = float(len(ps))
    return out


def _quantiles(key: str, ps: list[list[Any]]) -> dict[str, float]:
    count = sum(p[1] for p in ps)
    out = {f"{key}/mean": math.fsum(p[2] for p in ps) / count}
    out[f"{key}/min"], out[f"{key}/max"] = min(p[3] for p in ps), max(p[4] for p in ps)
    if all(p[6] is None for p in ps):
        xs = sorted(x for p in ps for x in p[5])
        out.update({f"{key}/{name}": _exact_quantile(xs, q) for name, q in QUANTILES.items()})
        return out
    sk: list[Any] = [{}, {}, 0]
    for p in ps:
        _merge_sketch(sk, p[6] if p[6] is not None else _sketch(p[5]))
    out.update({f"{key}/{name}": _sketch_quantile(sk, count, q) for name, q in QUANTILES.items()})
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
    group, publishes = run.group, True
    if group is None:
        group, publishes = _megatron_group()
    ranks = (
        list(dist.get_process_group_ranks(group))
        if group is not None
        else list(range(dist.get_world_size()))
    )
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


class _Part:
    __slots__ = ("metrics", "times", "spans", "last")

    def __init__(self) -> None:
        self.last = time.monotonic()  # when this rank last added to it
        self.metrics: dict[str, list[Any]] = {}
        self.times: dict[str, float] = {}
        self.spans: list[list[Any]] = []


class _Step:
    __slots__ = ("first", "metrics", "times")

    def __init__(self) -> None:
        self.first = time.monotonic()
        self.metrics: dict[int, dict[str, list[Any]]] = {}
        self.times: dict[int, dict[str, float]] = {}


class Gatherer:
    """One attached process's side of its role's reduction (see the module's docstring)."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.items: deque[tuple[Any, ...]] = deque()
        self.writer = bool(run.is_writer)
        self.wait = settings.reduce_wait()
        self.store, self.key, self.rank, self.size, self.publishes = _layout(run)
        self.origin_wall, self.origin = time.time(), time.perf_counter()
        self.open: dict[Any, dict[int, _Part]] = {}  # this rank's steps not published yet, per axis
        self.pending: dict[tuple[Any, int], _Step] = {}  # the writer's steps not logged yet
        self.latest: dict[Any, dict[int, int]] = {}  # axis -> rank -> its latest published step
        self.done: set[tuple[Any, int]] = set()
        self.logged: dict[tuple[Any, int], set[str]] = {}  # the RECENT latest done steps' keys
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
                if parts[step].last <= idle:
                    self._publish(axis, step, parts.pop(step))
        if self.writer:
            self._receive_all()
            self._close_due(force)

    def _take(self, axis: Any, step: Any, payload: Any) -> None:
        if isinstance(payload, tuple):  # a timed span: (phase, start, end, timed) on perf_counter
            phase, start, end, timed = payload
            ts, dur = round((start - self.origin) * 1e6, 3), round((end - start) * 1e6, 3)
            if not timed:  # a phase the host timed itself: the writer's trace only
                if self.writer and len(self.spans) < MAX_SPANS:
                    self.origins.setdefault(self.rank, self.origin_wall)
                    self.spans.append((self.rank, phase, step, ts, dur))
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

    def _part(self, axis: Any, step: int) -> _Part:
        parts = self.open.setdefault(axis, {})
        for older in sorted(s for s in parts if s < step):  # this rank moved past them
            self._publish(axis, older, parts.pop(older))
        part = parts.get(step)
        if part is None:
            part = parts[step] = _Part()
        else:
            part.last = time.monotonic()
        return part

    def _publish(self, axis: Any, step: int, part: _Part) -> None:
        if not self.publishes:
            return
        msg = {
            "r": self.rank,
            "a": axis,
            "s": step,
            "m": part.metrics,
            "ph": part.times,
            "sp": part.spans,
            "o": self.origin_wall,
        }
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

    def _receive(self, msg: dict[str, Any]) -> None:
        axis, step, rank = msg["a"], int(msg["s"]), int(msg["r"])
        latest = self.latest.setdefault(axis, {})
        latest[rank] = max(step, latest.get(rank, step))
        self.origins.setdefault(rank, float(msg["o"]))
        for phase, start, dur in msg["sp"]:
            if len(self.spans) < MAX_SPANS:
                self.spans.append((rank, phase, step, start, dur))
        if (axis, step) in self.done and (axis, step) in self.logged:  # more of a logged step
            self.done.discard((axis, step))
        if (axis, step) in self.done:
            self._say(
                "late",
                "tracking-core: role %r: a rank's values for step %s arrived after that step was logged (over %s s late, or a step logged again): not counted",
                self.run.role,
                step,
                self.wait,
            )
            return
        entry = self.pending.get((axis, step))
        if entry is None:
            entry = self.pending[(axis, step)] = _Step()
        if rank in entry.metrics:  # this rank published the step twice (a flush within it): fold
            for key, p in msg["m"].items():
                _fold(entry.metrics[rank], key, p)
            for phase, seconds in msg["ph"].items():
                entry.times[rank][phase] = entry.times[rank].get(phase, 0.0) + seconds
        else:
            entry.metrics[rank], entry.times[rank] = msg["m"], msg["ph"]

    def _close_due(self, force: bool) -> None:
        now = time.monotonic()
        for (axis, step), entry in sorted(self.pending.items(), key=lambda kv: kv[0][1]):
            latest = self.latest.get(axis, {})
            heard = len(entry.metrics) + sum(
                1 for r, s in latest.items() if s > step and r not in entry.metrics
            )
            if force or heard >= self.size or now - entry.first >= self.wait:
                del self.pending[(axis, step)]
                self.done.add((axis, step))
                self._log(axis, step, entry)

    def _log(self, axis: Any, step: int, entry: _Step) -> None:
        values = {**reduce(entry.metrics, self.size), **phases(entry.times, self.size)}
        logged = self.logged.pop((axis, step), set())
        again = [k for k in values if k in logged]
        if again:
            self._say(
                "again",
                "tracking-core: role %r step %s: %s arrived after that step's value was logged (a key logged or a "
                "phase timed again over %s s after the step's last call): not counted (said once)",
                self.run.role, step, ", ".join(sorted(again)[:5]), IDLE,
            )  # fmt: skip
            for k in again:
                del values[k]
        self.logged[(axis, step)] = logged | values.keys()
        if len(self.logged) > RECENT:
            del self.logged[next(iter(self.logged))]
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
            {
                "name": "process_name",
                "ph": "M",
                "pid": r,
                "args": {"name": f"rank {r}", "clock_origin_unix_s": o},
            }
            for r, o in sorted(self.origins.items())
        ]
        for rank, phase, step, ts, dur in self.spans:
            shift = (self.origins[rank] - start) * 1e6
            events.append(
                {
                    "name": phase,
                    "ph": "X",
                    "pid": rank,
                    "tid": phase,
                    "ts": ts + shift,
                    "dur": dur,
                    "args": {"step": step},
                }
            )
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
        if self.writer and not final:
            with self.lock:
                self._write_trace(deliver=False)
        if final:
            self.stop.set()
            with self.lock:
                self._tick(publish_all=True, force=True)
                if self.writer:
                    self._write_trace(deliver=True)
            if self.thread is not threading.current_thread():
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


def _fold(into: dict[str, list[Any]], key: str, p: list[Any]) -> None:
    q = into.get(key)
    if q is None:
        into[key] = p
    elif p[0] == "mean":
        q[1], q[2] = q[1] + p[1], q[2] + p[2]
    elif p[0] == "q":
        q[1], q[2], q[3], q[4] = q[1] + p[1], q[2] + p[2], min(q[3], p[3]), max(q[4], p[4])
        if q[6] is None and p[6] is None and len(q[5]) + len(p[5]) <= EXACT:
            q[5] = q[5] + p[5]
        else:
            sk = q[6] if q[6] is not None else _sketch(q[5])
            _merge_sketch(sk, p[6] if p[6] is not None else _sketch(p[5]))
            q[5], q[6] = None, sk
    else:
        q[1] = q[1] + p[1] if p[0] == "sum" else (max if p[0] == "max" else min)(q[1], p[1])


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
