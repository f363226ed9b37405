"""Small shared pieces of the benchmarks: timing a call, percentiles, markdown tables."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# A benchmark's fresh interpreter may run another tree's code (bench_core.py --against): its
# PYTHONPATH says which, and BENCH_TREE keeps this checkout off the front of the path.
if str(ROOT) not in sys.path and not os.environ.get("BENCH_TREE"):
    sys.path.insert(0, str(ROOT))


def metrics_row(i: int, n: int = 20) -> dict[str, float]:
    """The payload of one log call: ``n`` floats, as a training step logs them."""
    return {f"train/m{j:02d}": i * 0.001 + j for j in range(n)}


def payloads(count: int, n: int = 20) -> list[dict[str, float]]:
    """Payloads built ahead of time, so that timings measure the log call and nothing else."""
    return [metrics_row(i, n) for i in range(count)]


def per_call(fn: Callable[[int], Any], calls: int, warmup: int = 50) -> list[float]:
    """Seconds each of ``calls`` calls of ``fn(i)`` took on the calling thread."""
    for i in range(warmup):
        fn(i)
    samples = []
    clock = time.perf_counter
    for i in range(calls):
        start = clock()
        fn(i)
        samples.append(clock() - start)
    return samples


def pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def us(seconds: float) -> str:
    value = seconds * 1e6
    if value >= 1000:
        return f"{value / 1000:.2f} ms"
    return f"{value:.2f} µs" if value < 10 else f"{value:.0f} µs"


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def table(title: str, command: str, header: Sequence[str], rows: Sequence[Sequence[Any]],
          notes: str = "") -> str:
    """A markdown section: title, the command that produced it, the table, notes."""
    lines = [f"### {title}", "", f"`{command}`", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    if notes:
        lines += ["", notes]
    return "\n".join(lines) + "\n"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def ratio(value: float, reference: float) -> str:
    if reference <= 0:
        return "-"
    r = value / reference
    return f"{r:,.0f}x" if r >= 10 else f"{r:.2f}x"


# -- a no-op backend installed the way a user installs a plugin -------------------------------
NOOP_MODULE = '''
"""Benchmark backend: takes every record and does nothing (counts them)."""

import json
import os

import tracking_core


class Noop:
    def __init__(self, run):
        self.values = 0

    @tracking_core.hookimpl
    def open_run(self, run):
        return {"opened": run.run_id}

    @tracking_core.hookimpl
    def attach_run(self, run, attach):
        return None

    @tracking_core.hookimpl
    def log_metrics(self, records):
        self.values += len(records)

    @tracking_core.hookimpl
    def close_run(self, status, run):
        out = os.environ.get("BENCH_NOOP_OUT")
        if out:
            with open(out, "a") as fh:
                fh.write(json.dumps({"values": self.values, "status": status.value, "pid": os.getpid()}) + "\\n")


@tracking_core.hookimpl
def register_backends(register):
    from tracking_core.plugin_api import Backend

    register(Backend("noop", Noop))
'''


def install_noop_backend(site: Path) -> Path:
    """Write a real installed distribution (``*.dist-info`` with an entry point in the
    ``tracking_core`` group, as ``pip install`` leaves it) offering the backend ``noop``, and
    put ``site`` on ``sys.path``. Call before tracking-core's plugin manager is first used: the
    delivery process then loads the backend by its entry point like any plugin."""
    import importlib

    site.mkdir(parents=True, exist_ok=True)
    info = site / "bench_noop_tracking-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bench-noop-tracking\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[tracking_core]\nnoop = bench_noop_tracking\n")
    (site / "bench_noop_tracking.py").write_text(NOOP_MODULE)
    if str(site) not in sys.path:
        sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    return site


# -- processes, from /proc (no psutil needed) -------------------------------------------------
def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def descendants(pid: int) -> list[int]:
    out, todo = [], children(pid)
    while todo:
        current = todo.pop()
        out.append(current)
        todo += children(current)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _stat(pid: int) -> list[str]:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return text[text.rfind(")") + 2 :].split()  # fields from the 3rd (state) on


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (0 when it is gone)."""
    fields = _stat(pid)
    if len(fields) < 13:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pgid(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[2]) if len(fields) > 2 else None


#: Delivery processes a run of this process recorded (:func:`delivery_pid`): they are not in
#: this process's tree (the delivery process is started detached, through its keeper).
_RECORDED: set[int] = set()


def alive(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] not in ("Z", "X")


def delivery_pid(run: Any, timeout: float = 10.0) -> int | None:
    """The pid of ``run``'s delivery process, as the run records it (its keeper reports it a
    moment after ``start_run`` returns: waited for up to ``timeout``); None when the run
    delivers on a thread of this process."""
    delivery = getattr(run, "_delivery", None)
    if delivery is None or getattr(delivery, "proc", None) is None:
        return None
    deadline = time.monotonic() + timeout
    while delivery.pid is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if delivery.pid is not None:
        _RECORDED.add(delivery.pid)
    return delivery.pid


def delivery_processes() -> list[int]:
    """This process's live tracking-core delivery processes: those its runs recorded
    (:func:`delivery_pid`) and any in its own tree."""
    found = {p for p in _RECORDED if alive(p)}
    found.update(p for p in descendants(os.getpid()) if "tracking_core.delivery.process" in cmdline(p))
    return sorted(found)


def process_figures(pid: int) -> dict[str, Any]:
    """``pid``'s CPU seconds so far (its descendants' included: a tracker's own service) and
    its resident memory now and at its peak, in MiB, from ``/proc``."""
    status = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            status[key] = value.split()
    except OSError:
        pass

    def mib(key: str) -> float:
        return int(status[key][0]) / 1024 if key in status else float("nan")

    return {"pid": pid, "cpu_s": sum(cpu_seconds(p) for p in [pid, *descendants(pid)]),
            "rss_mib": mib("VmRSS"), "hwm_mib": mib("VmHWM")}


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """Wait until ``pid`` has exited; whether it did within ``timeout``."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def wait_delivery_gone(timeout: float = 30.0) -> float:
    """Wait until no delivery process of ours is left (seconds waited)."""
    start = time.perf_counter()
    while delivery_processes() and time.perf_counter() - start < timeout:
        time.sleep(0.05)
    return time.perf_counter() - start


def peak_rss_mib() -> float:
    """This process's peak resident memory (VmHWM) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")
