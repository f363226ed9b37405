"""Training-loop slowdown: a CPU-bound loop logging 10 times a second, with W&B offline, MLflow
over HTTP and TensorBoard active through tracking-core, against the same loop with no tracking
(and against the raw synchronous calls, as a verl-style loop makes them).

    python benchmarks/bench_loop.py [--seconds 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import metrics_row, table

os.environ.setdefault("WANDB_SILENT", "true")
logging.getLogger("tracking_core").setLevel(logging.ERROR)


def loop(seconds: float, log: Callable[[int, dict], None] | None) -> tuple[float, int]:
    """Iterations per second of a single-threaded matmul loop that logs every 0.1 s, and the
    number of log calls it made."""
    import torch

    torch.set_num_threads(1)
    a = torch.randn(192, 192)
    b = torch.randn(192, 192)
    iterations = 0
    step = 0
    start = time.perf_counter()
    next_log = start + 0.1
    end = start + seconds
    while True:
        for _ in range(20):
            a = torch.tanh(a @ b) * 0.5  # the "training step"; torch releases the GIL inside
            iterations += 1
        now = time.perf_counter()
        if now >= next_log:
            if log is not None:
                log(step, metrics_row(step))
            step += 1
            next_log += 0.1
        if now >= end:
            return iterations / (now - start), step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    import mlflow
    import wandb
    from tensorboardX import SummaryWriter

    import tracking_core
    from tests.helpers.mlflow_server import MlflowServer

    rates: dict[str, list[tuple[float, int]]] = {"none": [], "tracking-core": [], "raw": []}
    with tempfile.TemporaryDirectory() as tmpdir, MlflowServer(Path(tmpdir) / "server") as server:
        tmp = Path(tmpdir)
        for r in range(opts.rounds):
            rates["none"].append(loop(opts.seconds, None))

            run = tracking_core.start_run(
                backends=["wandb", "mlflow", "tensorboard"],
                tracking_dir=tmp / f"tc{r}",
                options={"mlflow_tracking_uri": server.uri, "wandb_mode": "offline"},
                export=False,
            )
            run.flush(60)
            rates["tracking-core"].append(
                loop(opts.seconds, lambda i, d, run=run: run.log_metrics(d, step=i, step_key="train/step"))
            )
            run.finish(timeout=120)

            mlflow.set_tracking_uri(server.uri)
            mlflow.set_experiment("bench-loop")
            mlflow.start_run()
            wb = wandb.init(mode="offline", dir=str(tmp), project="bench", reinit="create_new")
            tb = SummaryWriter(str(tmp / f"raw-tb{r}"))

            def raw(i: int, d: dict, wb=wb, tb=tb) -> None:  # noqa: ANN001
                wb.log(d)
                mlflow.log_metrics(d, step=i)
                for k, v in d.items():
                    tb.add_scalar(k, v, i)

            rates["raw"].append(loop(opts.seconds, raw))
            wb.finish()
            mlflow.end_run()
            tb.close()
    base = statistics.median(r for r, _ in rates["none"])
    rows = []
    for name, label in (
        ("none", "no tracking"),
        ("tracking-core", "tracking-core: W&B offline + MLflow (HTTP) + TensorBoard"),
        ("raw", "raw synchronous calls to the same three"),
    ):
        value = statistics.median(r for r, _ in rates[name])
        calls = sum(c for _, c in rates[name]) if name != "none" else 0
        slower = f"{(base - value) / base:+.1%}" if name != "none" else "-"
        rows.append([label, f"{value:,.0f}", calls or "-", slower])
    print(table(
        "Training-loop slowdown (CPU-bound loop logging 20 floats 10 times a second)",
        "python benchmarks/bench_loop.py",
        ["loop", "iterations/s (median of rounds)", "log calls", "slower than no tracking"],
        rows,
        f"{opts.rounds} rounds of {opts.seconds:.0f} s per arm, arms interleaved. Goal: "
        "tracking-core < 2% slower. The MLflow server and W&B's service run on the same machine.",
    ))


if __name__ == "__main__":
    main()
