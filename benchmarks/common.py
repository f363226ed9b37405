"""Small shared pieces of the benchmarks: timing a call, percentiles, markdown tables."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
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
