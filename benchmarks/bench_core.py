"""The core's own costs: `import tracking_core` in a fresh interpreter (beside the trackers'
own imports), and `log_metrics` with a backend that does nothing (what tracking-core itself adds
on the training thread).

    python benchmarks/bench_core.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections import deque
from pathlib import Path

from common import (
    ROOT,
    delivery_processes,
    install_noop_backend,
    median,
    payloads,
    pct,
    per_call,
    ratio,
    table,
    us,
)

CALLS = 5000
IMPORT_GOAL_S = 0.050
REPEAT = 7


def import_time(module: str, repeat: int = REPEAT) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    samples = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
        )
        samples.append(float(out.stdout.strip().splitlines()[-1]))
    return median(samples)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        install_noop_backend(tmp / "site")
        import tracking_core

        sections = []
        t_import = import_time("tracking_core")
        rows = [[
            "`import tracking_core` (pluggy + standard library only)",
            f"{t_import * 1000:.1f} ms",
            "1.00x",
            f"goal ≤ {IMPORT_GOAL_S * 1000:.0f} ms: {'met' if t_import <= IMPORT_GOAL_S else 'NOT met'}",
        ]]
        for module in ("pluggy", "wandb", "mlflow", "tensorboardX"):
            try:
                t = import_time(module, 3)
            except subprocess.CalledProcessError:
                continue
            rows.append([f"`import {module}`", f"{t * 1000:.1f} ms", ratio(t, t_import), ""])
        sections.append(table(
            "Import cost",
            "python benchmarks/bench_core.py",
            ["what", f"time (median of fresh interpreters: {REPEAT}, 3 for the trackers)",
             "vs tracking-core", "goal"],
            rows,
            f"Goal (issue 12): `import tracking_core` ≤ {IMPORT_GOAL_S * 1000:.0f} ms. The "
            "trackers are imported only in the delivery process, never by the training process.",
        ))

        data = payloads(CALLS + 100)
        floor: deque = deque()
        measured = {}
        for label, kwargs in (
            ("journal on, delivery process (the default)", {}),
            ("journal on, delivery on a thread", {"delivery": "thread"}),
            ("journal off, delivery process", {"journal": False}),
        ):
            run = tracking_core.start_run(
                backends=["noop"], tracking_dir=tmp / "tc", export=False, **kwargs
            )
            run.log_metrics({"warmup": 0.0}, step=0, step_key="warmup/step")
            run.flush(60)
            helpers = len(delivery_processes())
            measured[label] = per_call(
                lambda i, run=run: run.log_metrics(data[i], step=i, step_key="train/step"), CALLS
            )
            summary = run.finish(timeout=60)
            delivered = summary.backends["noop"]["delivered"] if summary else 0
            measured[label] = (measured[label], helpers, delivered, summary.logged if summary else 0)
        copy_put = per_call(lambda i: floor.append(dict(data[i])), CALLS)
    ref = pct(copy_put, 50)
    rows = [["floor: dict copy + deque append", us(ref), us(pct(copy_put, 99)), "1.00x", "-"]]
    for label, (samples, helpers, delivered, logged) in measured.items():
        rows.append([
            f"tracking-core `log_metrics`, no-op backend, {label}",
            us(pct(samples, 50)),
            us(pct(samples, 99)),
            ratio(pct(samples, 50), ref),
            f"{delivered:,} of {logged:,}" + ("" if helpers else " (no delivery process)"),
        ])
    sections.append(table(
        "Caller-thread cost of one log call (20 floats), no-op backend",
        "python benchmarks/bench_core.py",
        ["layer", "p50", "p99", "p50 vs floor", "values delivered"],
        rows,
        f"{CALLS} calls on the training thread, after a warm-up value has been delivered; the "
        "pump (and, with thread delivery, the follower) run in the background. The no-op "
        "backend is installed as an entry-point distribution, so the delivery process loads it "
        "like any plugin.",
    ))
    print("\n".join(sections))


if __name__ == "__main__":
    main()
