"""The main job's cost: `tracking-core demo` with its default settings (the embedded MLflow
store), wall time and peak memory of its whole process tree (driver, launchers, all ranks).

    python benchmarks/bench_demo.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import children, table


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss(pid: int) -> tuple[int, int]:
    """Total and largest RSS (KiB) of ``pid`` and all its descendants."""
    total, largest, todo = 0, 0, [pid]
    while todo:
        current = todo.pop()
        rss = _rss_kib(current)
        total += rss
        largest = max(largest, rss)
        todo += children(current)
    return total, largest


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "tracking_core.cli", "demo", "--out", str(Path(tmp) / "out")]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        peak_total = peak_one = 0
        while proc.poll() is None:
            total, largest = tree_rss(proc.pid)
            peak_total, peak_one = max(peak_total, total), max(peak_one, largest)
            time.sleep(0.2)
        wall = time.perf_counter() - start
    print(table(
        "The demo job (defaults: 20 steps, actor 2 ranks, critic 2 ranks, embedded MLflow)",
        "python benchmarks/bench_demo.py",
        ["exit code", "wall time", "peak RSS, whole process tree", "peak RSS, largest process"],
        [[proc.returncode, f"{wall:.0f} s", f"{peak_total / 1024:,.0f} MiB", f"{peak_one / 1024:,.0f} MiB"]],
        "Goal: ≤ 3 minutes wall on 2 cores. The tree is the driver, two torchrun launchers, "
        "four ranks (each imports torch and megatron-core) and a delivery process for each of "
        "the three writers (the driver, the actor's and the critic's writer ranks), which runs "
        "the trackers' client code.",
    ))


if __name__ == "__main__":
    main()
