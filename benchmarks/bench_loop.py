"""Training-loop slowdown: a CPU-bound loop logging 10 times a second, with W&B offline, MLflow
over HTTP and TensorBoard active through tracking-core, against the same loop with no tracking
(and against the raw synchronous calls, as a verl-style loop makes them).

    python benchmarks/bench_loop.py [--seconds 3] [--rounds 10]
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

from common import (
    cpu_seconds,
    delivery_pid,
    delivery_processes,
    descendants,
    metrics_row,
    pgid,
    table,
)

os.environ.setdefault("WANDB_SILENT", "true")
logging.getLogger("tracking_core").setLevel(logging.ERROR)


def helper_cpu(exclude_group: int | None = None) -> dict[int, float]:
    """CPU seconds used so far by each of this process's helper processes: tracking-core's
    delivery processes (started outside this process's tree: found by the pid each run
    records) and the trackers' services they or this process started (W&B's), not the MLflow
    server's process group (it stands for a remote one)."""
    pids = set(descendants(os.getpid()))
    for delivery in delivery_processes():
        pids.update([delivery, *descendants(delivery)])
    return {pid: cpu_seconds(pid) for pid in pids if exclude_group is None or pgid(pid) != exclude_group}


def helper_cpu_since(before: dict[int, float], exclude_group: int | None) -> float:
    """CPU seconds the helpers alive now used since ``before`` (a helper that ended meanwhile
    is not counted; one that started meanwhile counts whole)."""
    now = helper_cpu(exclude_group)
    return sum(max(0.0, cpu - before.get(pid, 0.0)) for pid, cpu in now.items())


def loop(seconds: float, log: Callable[[int, dict], None] | None,
         exclude_group: int | None = None) -> tuple[float, int, float, float]:
    """Iterations per second of a single-threaded matmul loop that logs every 0.1 s, the number
    of log calls it made, the CPU seconds per second the process's *other* threads used
    meanwhile (tracking-core's pump, whatever threads the trackers start in-process) and those
    its helper processes used (tracking-core's delivery processes, W&B's service)."""
    import torch

    torch.set_num_threads(1)
    a = torch.randn(192, 192)
    b = torch.randn(192, 192)
    iterations = 0
    step = 0
    cpu0, main0, helpers0 = time.process_time(), time.thread_time(), helper_cpu(exclude_group)
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
            background = (time.process_time() - cpu0) - (time.thread_time() - main0)
            helpers = helper_cpu_since(helpers0, exclude_group)
            return iterations / (now - start), step, background / (now - start), helpers / (now - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=10)
    opts = parser.parse_args()
    import mlflow
    import wandb
    from tensorboardX import SummaryWriter

    import tracking_core
    from tests.helpers.mlflow_server import MlflowServer

    rates: dict[str, list[tuple[float, int, float, float]]] = {"none": [], "tracking-core": [], "raw": []}
    ratios: dict[str, list[float]] = {"tracking-core": [], "raw": []}
    control: list[float] = []  # the two no-tracking arms of a round against each other
    with tempfile.TemporaryDirectory() as tmpdir, MlflowServer(Path(tmpdir) / "server") as server:
        tmp = Path(tmpdir)
        group = pgid(server.proc.pid) if server.proc is not None else None
        for r in range(opts.rounds):
            run = tracking_core.start_run(
                backends=["wandb", "mlflow", "tensorboard"],
                tracking_dir=tmp / f"tc{r}",
                options={"mlflow_tracking_uri": server.uri, "wandb_mode": "offline"},
                export=False,
            )
            delivery_pid(run)  # recorded: its CPU counts among the helpers'
            for i in range(3):  # one-time costs (trackers import modules on first log) excluded
                run.log_metrics(metrics_row(i), step=i, step_key="train/warmup")
            run.flush(60)
            # Paired, ABBA: no tracking, tracking-core, tracking-core, no tracking; the round's
            # slowdown compares the two sums (a linear drift of the machine's speed cancels),
            # and the result is the median over rounds. After each tracking-core arm the run is
            # flushed and left to settle, untimed, so that no arm inherits another's delivery.
            def tracked(i: int, d: dict, run=run) -> None:  # noqa: ANN001
                run.log_metrics(d, step=i, step_key="train/step")

            measured = {"none": [], "tracking-core": []}
            for name, log in (("none", None), ("tracking-core", tracked), ("tracking-core", tracked), ("none", None)):
                measured[name].append(loop(opts.seconds, log, group))
                if log is not None:
                    run.flush(60)
                    time.sleep(1.0)
            for name, pair in measured.items():
                rates[name].extend(pair)
            tc, none = (sum(m[0] for m in measured[k]) for k in ("tracking-core", "none"))
            ratios["tracking-core"].append(tc / none)
            control.append(measured["none"][1][0] / measured["none"][0][0])
            run.finish(timeout=120)

            mlflow.set_tracking_uri(server.uri)
            mlflow.set_experiment("bench-loop")
            mlflow.start_run()
            wb = wandb.init(mode="offline", dir=str(tmp), project="bench", reinit="create_new")
            tb = SummaryWriter(str(tmp / f"raw-tb{r}"))
            for i in range(3):
                wb.log(metrics_row(i))
                mlflow.log_metrics(metrics_row(i), step=i)

            def raw(i: int, d: dict, wb=wb, tb=tb) -> None:  # noqa: ANN001
                wb.log(d)
                mlflow.log_metrics(d, step=i)
                for k, v in d.items():
                    tb.add_scalar(k, v, i)

            rates["raw"].append(loop(opts.seconds, raw, group))
            ratios["raw"].append(rates["raw"][-1][0] / (none / 2))
            wb.finish()
            mlflow.end_run()
            tb.close()
    rows = []
    for name, label in (
        ("none", "no tracking"),
        ("tracking-core", "tracking-core: W&B offline + MLflow (HTTP) + TensorBoard"),
        ("raw", "raw synchronous calls to the same three"),
    ):
        value = statistics.median(r for r, _, _, _ in rates[name])
        calls = sum(c for _, c, _, _ in rates[name]) if name != "none" else "-"
        background = statistics.median(b for _, _, b, _ in rates[name]) * 1000
        helpers = statistics.median(h for _, _, _, h in rates[name]) * 1000
        slower = f"{1 - statistics.median(ratios[name]):+.1%}" if name != "none" else "-"
        spread = (
            f"{1 - max(ratios[name]):+.1%} .. {1 - min(ratios[name]):+.1%}" if name != "none" else "-"
        )
        rows.append([label, f"{value:,.0f}", calls, f"{background:.1f} ms/s", f"{helpers:.1f} ms/s", slower, spread])
    rows.append([
        "noise floor: the round's 2nd no-tracking arm against its 1st",
        "-", "-", "-", "-",
        f"{1 - statistics.median(control):+.1%}",
        f"{1 - max(control):+.1%} .. {1 - min(control):+.1%}",
    ])
    print(table(
        "Training-loop slowdown (CPU-bound loop logging 20 floats 10 times a second)",
        "python benchmarks/bench_loop.py",
        ["loop", "iterations/s (median)", "log calls", "other threads' CPU", "helper processes' CPU", "slower (median of paired rounds)", "range over rounds"],
        rows,
        f"{opts.rounds} rounds; each measures {opts.seconds:.0f} s arms in the order no "
        "tracking, tracking-core, tracking-core, no tracking (the run flushed and settled, "
        "untimed, after each tracking-core arm), then the raw calls; a round's slowdown compares "
        "the sums of its arms (the raw calls against the mean of its no-tracking arms), and the "
        "table gives the median over rounds. \"Other threads' CPU\" is the CPU time the training process "
        "spent outside the training thread per second of loop (tracking-core's pump; the raw "
        "calls' trackers' own threads); \"helper processes' CPU\" is what its helper processes "
        "used: tracking-core's delivery process, where the trackers' client code runs (started "
        "outside the training process's tree, found by the pid its run records), and W&B's "
        "service with the raw calls; not the MLflow server. Goal: < 2% slower. The MLflow server, W&B's "
        "service and the delivery process run on the same 2-core machine as the loop.",
    ))


if __name__ == "__main__":
    main()
