"""The core's own costs: `import tracking_core`, and `log_metrics` through the plugin manager
with a backend that does nothing (what tracking-core itself adds on the training thread).

    python benchmarks/bench_core.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections import deque

from common import ROOT, median, payloads, pct, per_call, table, us

CALLS = 5000


def import_time(repeat: int = 5) -> float:
    code = "import time; t = time.perf_counter(); import tracking_core; print(time.perf_counter() - t)"
    samples = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=ROOT, check=True)
        samples.append(float(out.stdout))
    return median(samples)


class NoopBackend:
    def __init__(self, run):  # noqa: ANN001
        pass


def main() -> None:
    import tracking_core
    from tracking_core.plugins import get_plugin_manager

    class Plugin:
        @tracking_core.hookimpl
        def register_backends(self, register):  # noqa: ANN001
            register("noop", NoopBackend)

    get_plugin_manager().register(Plugin(), "bench-noop")
    sections = []
    t_import = import_time()
    sections.append(table(
        "Import cost",
        "python benchmarks/bench_core.py",
        ["what", "time (median of 5 fresh interpreters)"],
        [["`import tracking_core` (pluggy + standard library only)", f"{t_import * 1000:.1f} ms"]],
    ))

    data = payloads(CALLS + 100)
    floor: deque = deque()
    with tempfile.TemporaryDirectory() as tmp:
        run = tracking_core.start_run(backends=["noop"], tracking_dir=tmp, export=False)
        core = per_call(lambda i: run.log_metrics(data[i], step=i, step_key="train/step"), CALLS)
        run.finish()
        nojournal = tracking_core.start_run(
            backends=["noop"], tracking_dir=tmp, export=False, journal=False
        )
        core_nj = per_call(lambda i: nojournal.log_metrics(data[i], step=i), CALLS)
        nojournal.finish()
    copy_put = per_call(lambda i: floor.append(dict(data[i])), CALLS)
    rows = [
        [name, us(pct(samples, 50)), us(pct(samples, 99))]
        for name, samples in (
            ("floor: dict copy + deque append", copy_put),
            ("tracking-core `log_metrics`, no-op backend, journal on", core),
            ("tracking-core `log_metrics`, no-op backend, journal off", core_nj),
        )
    ]
    sections.append(table(
        "Caller-thread cost of one log call (20 floats), no-op backend",
        "python benchmarks/bench_core.py",
        ["layer", "p50", "p99"],
        rows,
        f"{CALLS} calls on the training thread; the pump and workers run in the background.",
    ))
    print("\n".join(sections))


if __name__ == "__main__":
    main()
