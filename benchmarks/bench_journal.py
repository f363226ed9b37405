"""The intake and the journal over a long run: millions of values logged to a backend that takes
them at once (``noop``, installed as a real entry-point distribution so that the delivery process
loads it like any plugin), with the default segment size.

Two loops: **flat out** (every call straight after the previous one: the worst case, logging
faster than the pump journals, so the intake's bound and its backpressure are in force) and
**paced** (a fixed rate of calls, as a training loop logs). For each, two tables:

* **the training process**: its peak memory while logging (VmHWM, reset before the loop, less
  the resident memory then) against the intake's bound (``TRACKING_CORE_QUEUE_RECORDS`` calls of
  this size, measured with ``tracemalloc``); how far behind the journal is (every 0.1 s while the
  loop runs, now less the time its newest record was logged: most and median); the caller's
  p50 / p99 / mean per call and how often a call journaled for the pump (backpressure);
* **the journal's disk use** (sampled every second): its peak and final size against the bytes
  its records take in all (what one unrotated file would hold at the end), the acknowledged
  bytes still on disk at the peak (what rotation has not deleted yet: the bound is about one
  segment).

    python benchmarks/bench_journal.py [--calls 500000] [--paced-seconds 60 --paced-rate 2000]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import threading
import time
import tracemalloc
from array import array
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from common import (
    delivery_pid,
    install_noop_backend,
    metrics_row,
    pct,
    table,
    us,
)

logging.getLogger("tracking_core").setLevel(logging.ERROR)

VALUES = 20
MiB = 1 << 20


def mib(n: float) -> str:
    return f"{n / MiB:,.1f} MiB"


@dataclass
class Sample:
    t: float
    size: int  # bytes of every file under journal/
    segments: int
    first_n: int | None  # first record of the oldest segment on disk
    acked: int  # every record up to this one is acknowledged (-1: none)


@dataclass
class Sampler:
    """Every ``interval`` seconds: the journal's size, its segments and how far it is acked."""

    root: Path
    interval: float = 1.0
    samples: list[Sample] = field(default_factory=list)
    first_of: dict[str, int] = field(default_factory=dict)  # segment file -> its first record
    sizes: dict[str, int] = field(default_factory=dict)  # segment file -> largest size seen
    _stop: threading.Event = field(default_factory=threading.Event)
    _t0: float = field(default_factory=time.perf_counter)

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        size, segs, oldest, acked = 0, [], None, -1
        for dirpath, _, files in os.walk(self.root):
            for name in files:
                path = Path(dirpath) / name
                try:
                    st = path.stat().st_size
                except OSError:
                    continue
                size += st
                if name.startswith("seg-"):
                    segs.append(name)
                    self.sizes[name] = max(st, self.sizes.get(name, 0))
                    if name not in self.first_of:
                        first = first_record(path)
                        if first is not None:
                            self.first_of[name] = first
                elif name == "acks.json":
                    try:
                        acked = min(int(p["n"]) for p in json.loads(path.read_text()).values())
                    except (OSError, ValueError, KeyError, TypeError):
                        pass
        if segs:
            oldest = self.first_of.get(min(segs))
        self.samples.append(Sample(time.perf_counter() - self._t0, size, len(segs), oldest, acked))


@dataclass
class LagSampler:
    """Every ``interval`` seconds while the loop runs: how long ago the oldest call not journaled
    yet was made, i.e. now less the time the journal's newest record was logged (its ``ts``), or
    less the loop's start while no record of the loop is journaled yet."""

    root: Path
    begin: float
    interval: float = 0.1
    lags: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> LagSampler:
        self._thread = threading.Thread(target=self._loop, name="bench-lag", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            ts = newest_ts(self.root)
            if ts is not None:
                self.lags.append(time.time() - max(ts, self.begin))


def newest_ts(root: Path) -> float | None:
    """The ``ts`` of the last whole record of the newest segment under ``root``."""
    found = sorted(root.rglob("seg-*.jsonl"))
    for path in reversed(found):
        try:
            with open(path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - (64 << 10)))
                tail = fh.read()
        except OSError:
            continue
        for line in reversed(tail.split(b"\n")[:-1]):
            try:
                return float(json.loads(line)["ts"])
            except (ValueError, KeyError, TypeError):
                continue
    return None


def memory(field_name: str) -> int:
    """A ``/proc/self/status`` size in bytes (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> None:
    """From now on VmHWM is the peak (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def queued_bytes(pool: list[dict[str, float]]) -> float:
    """What one call waiting in the intake's queue holds (its copy of the metrics, the tuple,
    the timestamp), measured with tracemalloc over 10,000 calls of the pool's rows."""
    held: deque = deque()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(10_000):
        held.append(("row", time.time(), dict(pool[i % len(pool)]), i, "train/step"))
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    return sum(s.size_diff for s in after.compare_to(before, "filename")) / 10_000


def first_record(path: Path) -> int | None:
    try:
        with open(path, "rb") as fh:
            head = fh.readline()
        return int(json.loads(head)["n"]) if head.endswith(b"\n") else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def unrotated_bytes(calls: int, pool: list[dict[str, float]]) -> int:
    """The bytes the run's records take in the journal's format (one compact JSON object per
    line: the warm-up row, then one row per call; a timestamp's repr taken as 18 characters)."""

    def size(n: int, metrics: dict[str, float], step: int, step_key: str) -> int:
        obj = {"n": n, "t": "row", "ts": 1796000000.1234567, "m": metrics, "st": step, "sk": step_key}
        return len(json.dumps(obj, separators=(",", ":"))) + 1

    base = size(0, {}, 0, "train/step") - 3  # without n's and st's digits (one each)
    payload = [size(0, m, 0, "train/step") - size(0, {}, 0, "train/step") for m in pool]
    total = size(0, {"warmup": 0.0}, 0, "warmup/step")
    for i in range(calls):
        total += base + payload[i % len(pool)] + len(str(i + 1)) + len(str(i))
    return total


def arm(name: str, tmp: Path, calls: int, rate: float | None) -> dict:
    import tracking_core

    pool = [metrics_row(i, VALUES) for i in range(1000)]
    out_file = tmp / f"{name}-noop.jsonl"
    os.environ["BENCH_NOOP_OUT"] = str(out_file)
    tracking_dir = tmp / name
    run = tracking_core.start_run(backends=["noop"], tracking_dir=tracking_dir, export=False)
    run.log_metrics({"warmup": 0.0}, step=0, step_key="warmup/step")
    run.flush(60)
    in_process = delivery_pid(run) is not None
    sampler = Sampler(tracking_dir / "journal").start()
    samples = array("d", bytes(8 * calls))
    reset_peak()
    rss_before = memory("VmRSS")
    lag = LagSampler(tracking_dir / "journal", time.time()).start()
    clock = time.perf_counter
    begin = clock()
    if rate is None:
        for i in range(calls):
            t0 = clock()
            run.log_metrics(pool[i % 1000], step=i, step_key="train/step")
            samples[i] = clock() - t0
    else:
        period = 1.0 / rate
        next_at = begin
        for i in range(calls):
            t0 = clock()
            run.log_metrics(pool[i % 1000], step=i, step_key="train/step")
            samples[i] = clock() - t0
            next_at += period
            while clock() < next_at:  # a busy "training step" between log calls
                pass
    logged = clock() - begin
    lag.stop()
    grew = memory("VmHWM") - rss_before
    drained = run.flush(timeout=900)
    delivered_at = clock() - begin
    summary = run.finish(timeout=120)
    sampler.stop()
    counted = 0
    if out_file.exists():
        counted = sum(json.loads(line)["values"] for line in out_file.read_text().splitlines())
    peak = max(sampler.samples, key=lambda s: s.size)
    unrotated = unrotated_bytes(calls, pool)
    line = unrotated / (calls + 1)
    # Acknowledged records still on disk at the peak: from the oldest segment's first record up
    # to the acked one (records are of about one size in this run).

    def acked_on_disk(s: Sample) -> float:
        """Acknowledged records still on disk: from the oldest segment's first record up to
        the acknowledged one (the records of this run are of about one size)."""
        return max(0.0, (s.acked - s.first_n + 1) * line) if s.first_n is not None else 0.0

    acked_kept = acked_on_disk(peak)
    acked_max = max(acked_on_disk(s) for s in sampler.samples)
    final = sampler.samples[-1]
    return {
        "name": name,
        "calls": calls,
        "values": calls * VALUES,
        "logged_s": logged,
        "delivered_s": delivered_at,
        "drained": drained,
        "process": in_process,
        "delivered": summary.backends["noop"]["delivered"] if summary else 0,
        "logged": summary.logged if summary else 0,
        "counted": counted,
        "journal_left": summary.journal if summary else "?",
        "peak": peak,
        "final": final,
        "unrotated": unrotated,
        "line": line,
        "acked_kept": acked_kept,
        "acked_max": acked_max,
        "segments_seen": len(sampler.first_of),
        "max_segment": max(sampler.sizes.values(), default=0),
        "p50": pct(samples, 50),
        "p99": pct(samples, 99),
        "mean": sum(samples) / len(samples),
        "n_samples": len(sampler.samples),
        "grew": grew,
        "lag_max": max(lag.lags, default=float("nan")),
        "lag_p50": pct(lag.lags, 50) if lag.lags else float("nan"),
        "lag_samples": len(lag.lags),
        "relieved": summary.relieved if summary else 0,
        "bound": run._intake.max_items,
        "queued_bytes": queued_bytes(pool),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500_000, help="flat-out log calls of 20 floats")
    parser.add_argument("--paced-rate", type=float, default=2000.0, help="paced loop: calls per second")
    parser.add_argument("--paced-seconds", type=float, default=60.0)
    opts = parser.parse_args()
    segment = int(os.environ.get("TRACKING_CORE_SEGMENT_BYTES") or 8 * MiB)
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        install_noop_backend(tmp / "site")
        results = [arm("flat-out", tmp, opts.calls, None)]
        results.append(arm("paced", tmp, int(opts.paced_rate * opts.paced_seconds), opts.paced_rate))
    print(intake_table(results, opts.paced_rate))
    rows = []
    for r in results:
        label = (
            f"flat out: {r['calls']:,} calls" if r["name"] == "flat-out"
            else f"paced: {r['calls']:,} calls, {opts.paced_rate:,.0f} a second"
        )
        peak = r["peak"]
        unacked = max(0.0, peak.size - r["acked_kept"])
        rows.append([
            label,
            f"{r['values'] / 1e6:,.1f} M",
            f"{r['logged_s']:,.1f} s / {r['delivered_s']:,.1f} s",
            f"{r['delivered']:,} of {r['logged']:,}"
            + ("" if r["delivered"] == r["counted"] else f" (the backend counted {r['counted']:,})"),
            mib(r["unrotated"]),
            f"{mib(peak.size)} ({peak.size / r['unrotated']:.0%})",
            f"{mib(unacked)} + {mib(r['acked_kept'])}",
            mib(r["acked_max"]),
            f"{mib(r['max_segment'])} ({r['segments_seen']} seen)",
            "removed" if r["final"].size == 0 and not r["journal_left"] else f"{mib(r['final'].size)} kept",
            f"{us(r['p50'])} / {us(r['p99'])} / {us(r['mean'])}",
        ])
    flat, paced = results
    verdict = []
    for r in results:
        ok = r["acked_max"] <= segment * 1.25 and r["max_segment"] <= segment * 1.25
        verdict.append(
            f"{r['name']}: {'bounded' if ok else 'NOT bounded'} by the unacknowledged records plus "
            f"about one segment (acknowledged records on disk at most {mib(r['acked_max'])}, "
            f"largest segment {mib(r['max_segment'])})"
        )
    burst = (
        "A burst becomes one segment: the pump journals everything queued in one write and a "
        "segment is closed only after a write; and a fully acknowledged segment is deleted only "
        "once the next one holds a record. "
        if any(r["max_segment"] > segment * 1.25 for r in results)
        else ""
    )
    print(table(
        "Journal disk use over a long run (20 floats a call, no-op backend in the delivery process)",
        "python benchmarks/bench_journal.py",
        ["loop", "values", "logged in / all delivered after", "values delivered",
         "records, unrotated", "journal peak (of unrotated)",
         "at the peak: unacknowledged + acknowledged", "acknowledged on disk, most",
         "largest segment", "journal after finish", "caller p50 / p99 / mean per call"],
        rows,
        f"Segment size {mib(segment)} (`TRACKING_CORE_SEGMENT_BYTES`; the default is 8 MiB). "
        f"{'; '.join(verdict)}. "
        f"{burst}"
        f"The journal (`<tracking_dir>/journal`, every file in it) is sampled every second by a "
        f"thread of the training process ({flat['n_samples']} and {paced['n_samples']} samples). "
        f"\"Records, unrotated\" is what one never-rotated file would hold at the end: every "
        f"record in the journal's format ({flat['line']:.0f} bytes a record). The split of the "
        f"peak is estimated from the acknowledgements (`acks.json`) and each segment's first "
        f"record. The flat-out loop calls `log_metrics` back to back (the worst case: records "
        f"pile up faster than anything delivers them); the paced loop spins between calls like "
        f"a training step. Delivery ran in "
        f"{'a delivery process' if flat['process'] else 'a thread (no delivery process found!)'}; "
        f"\"values delivered\" is the finish summary's count (the warm-up value included), "
        f"checked against the backend's own count.",
    ))


def label_of(r: dict, paced_rate: float) -> str:
    if r["name"] == "flat-out":
        return f"flat out: {r['calls']:,} calls"
    return f"paced: {r['calls']:,} calls, {paced_rate:,.0f} a second"


def intake_table(results: list[dict], paced_rate: float) -> str:
    rows = []
    for r in results:
        bound = r["bound"] * r["queued_bytes"]
        rows.append([
            label_of(r, paced_rate),
            f"{r['logged_s']:,.1f} s ({r['calls'] / r['logged_s']:,.0f} calls/s)",
            f"{mib(r['grew'])} (bound {r['bound']:,} calls = {mib(bound)})",
            f"{r['lag_max']:.2f} s / {r['lag_p50']:.2f} s",
            f"{us(r['p50'])} / {us(r['p99'])} / {us(r['mean'])}",
            f"{r['relieved']:,}",
            f"{r['delivered']:,} of {r['logged']:,}",
        ])
    flat = results[0]
    return table(
        "The intake under flat-out and paced logging: memory, lag, caller (20 floats a call)",
        "python benchmarks/bench_journal.py",
        ["loop", "logged in", "training process peak memory growth (the bound)",
         "journal behind the loop: most / median", "caller p50 / p99 / mean per call",
         "calls that journaled for the pump", "values delivered"],
        rows,
        f"Peak memory growth: the training process's VmHWM while the loop ran (reset before it) "
        f"less its resident memory then; the loop's own per-call timings are preallocated. The "
        f"bound: `TRACKING_CORE_QUEUE_RECORDS` ({flat['bound']:,}) calls of {flat['queued_bytes']:,.0f} "
        f"bytes each waiting in the intake (tracemalloc: the call's copy of its 20 values, the "
        f"tuple and the timestamp; the values themselves are the caller's). The rest of the growth is "
        f"the chunk being converted and written, and the interpreter's allocator. Behind: every "
        f"0.1 s while the loop ran, now less the time the journal's newest record was logged "
        f"({flat['lag_samples']} and {results[1]['lag_samples']} samples; a paced loop's journal "
        f"waits up to one flush interval, 0.5 s, for the pump). Flat out, calls beyond the bound "
        f"journal a chunk themselves (backpressure): the loop runs at the pump's pace, the p50 "
        f"stays that of an append, the mean carries the pump's conversion.",
    )


if __name__ == "__main__":
    main()
