"""Delivery throughput to a real MLflow server: tracking-core's batched worker against raw
per-call `log_metric` and against raw `log_batch` of 1000 metrics (the server's ceiling).

The ceiling and tracking-core are measured in alternating rounds (ceiling first in even rounds,
tracking-core first in odd ones), each on a fresh run, so that a change of the shared machine's
speed hits both alike; the table gives the medians and each round's ratio.

    python benchmarks/bench_delivery.py [--rows 1500] [--per-call 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

from common import payloads, table

logging.getLogger("tracking_core").setLevel(logging.ERROR)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1500, help="log calls of 20 metrics")
    parser.add_argument("--per-call", type=int, default=300, help="metrics sent one request each")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    import tracking_core
    from tests.helpers.mlflow_server import MlflowServer

    total = opts.rows * 20
    data = payloads(opts.rows)
    ceilings: list[float] = []
    ours: list[float] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmpdir, MlflowServer(Path(tmpdir) / "server") as server:
        client = MlflowClient(server.uri)
        exp = client.create_experiment("bench-delivery")

        run_id = client.create_run(exp).info.run_id
        start = time.perf_counter()
        for i in range(opts.per_call):
            client.log_metric(run_id, f"m{i % 20}", float(i), step=i // 20)
        per_call = opts.per_call / (time.perf_counter() - start)

        def ceiling() -> None:
            run_id = client.create_run(exp).info.run_id
            now = int(time.time() * 1000)
            start = time.perf_counter()
            for offset in range(0, total, 1000):
                client.log_batch(
                    run_id,
                    metrics=[
                        Metric(f"m{j % 20}", float(j), now, j // 20)
                        for j in range(offset, min(total, offset + 1000))
                    ],
                )
            ceilings.append(total / (time.perf_counter() - start))

        def tracking_core_round(r: int) -> None:
            run = tracking_core.start_run(
                backends=["mlflow"],
                tracking_dir=Path(tmpdir) / f"tc{r}",
                options={"mlflow_tracking_uri": server.uri},
                export=False,
            )
            # As for the raw calls, one-time costs (the delivery process imports mlflow, opens
            # the run; the client's first request sets up what it needs) are not measured.
            run.log_metrics({"warmup/x": 1.0}, step=0, step_key="warmup/step")
            run.flush(60)
            start = time.perf_counter()
            for i in range(opts.rows):
                run.log_metrics(data[i], step=i, step_key="train/step")
            logged = time.perf_counter() - start
            drained = run.flush(timeout=300)
            ours.append(total / (time.perf_counter() - start))
            summary = run.finish()
            stored = sum(
                len(client.get_metric_history(run.handle.backends["mlflow"]["run_id"], key))
                for key in data[0]
            )
            undelivered = summary.backends["mlflow"]["undelivered"] if summary else "?"
            journal = "removed" if summary is not None and summary.journal is None else "kept"
            notes.append(
                f"round {r + 1}: logged in {logged * 1000:.0f} ms, drained={drained}, "
                f"{undelivered} values not delivered at finish (journal {journal}), "
                f"{stored} of {total} read back"
            )

        for r in range(opts.rounds):
            if r % 2 == 0:
                ceiling()
                tracking_core_round(r)
            else:
                tracking_core_round(r)
                ceiling()
    ceiling_m = statistics.median(ceilings)
    ours_m = statistics.median(ours)
    ratios = [o / c for o, c in zip(ours, ceilings, strict=True)]
    spread = lambda xs: f"{min(xs):,.0f} .. {max(xs):,.0f}"  # noqa: E731
    rows = [
        ["raw `MlflowClient.log_metric`, one request per metric", opts.per_call,
         f"{per_call:,.0f}", "-", f"{per_call / ceiling_m:.0%}"],
        [f"raw `MlflowClient.log_batch` of 1000 (the ceiling), {opts.rounds} rounds", total,
         f"{ceiling_m:,.0f}", spread(ceilings), "100%"],
        [f"tracking-core, 20 metrics per call, batched by its worker, {opts.rounds} rounds", total,
         f"{ours_m:,.0f}", spread(ours),
         f"{statistics.median(ratios):.0%} (rounds: {', '.join(f'{x:.0%}' for x in ratios)})"],
    ]
    print(table(
        "MLflow delivery throughput (metrics per second, real `mlflow server`, SQLite, 1 worker)",
        "python benchmarks/bench_delivery.py",
        ["sender", "metrics a round", "metrics/s (median)", "range over rounds", "vs ceiling"],
        rows,
        f"tracking-core is timed from its first log call until `flush` returns (everything "
        f"delivered); besides the values it sends the step axis (`train/step`) as a series of "
        f"its own. {'; '.join(notes)}. Goal: ≥ 90% of the ceiling (the median of the rounds' "
        f"ratios), no backlog at finish.",
    ))


if __name__ == "__main__":
    main()
