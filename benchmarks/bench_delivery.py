"""Delivery throughput to a real MLflow server: tracking-core's batched worker against raw
per-call `log_metric` and against raw `log_batch` of 1000 metrics (the server's ceiling).

    python benchmarks/bench_delivery.py [--rows 1500]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

from common import payloads, table

logging.getLogger("tracking_core").setLevel(logging.ERROR)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1500, help="log calls of 20 metrics")
    parser.add_argument("--per-call", type=int, default=300, help="metrics sent one request each")
    opts = parser.parse_args()
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    import tracking_core
    from tests.helpers.mlflow_server import MlflowServer

    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmpdir, MlflowServer(Path(tmpdir) / "server") as server:
        client = MlflowClient(server.uri)
        exp = client.create_experiment("bench-delivery")

        run_id = client.create_run(exp).info.run_id
        start = time.perf_counter()
        for i in range(opts.per_call):
            client.log_metric(run_id, f"m{i % 20}", float(i), step=i // 20)
        per_call = opts.per_call / (time.perf_counter() - start)

        run_id = client.create_run(exp).info.run_id
        total = opts.rows * 20
        now = int(time.time() * 1000)
        start = time.perf_counter()
        for offset in range(0, total, 1000):
            client.log_batch(
                run_id,
                metrics=[Metric(f"m{j % 20}", float(j), now, j // 20) for j in range(offset, min(total, offset + 1000))],
            )
        ceiling = total / (time.perf_counter() - start)

        data = payloads(opts.rows)
        run = tracking_core.start_run(
            backends=["mlflow"], tracking_dir=Path(tmpdir) / "tc", options={"mlflow_tracking_uri": server.uri},
            export=False,
        )
        # As for the raw calls above, one-time costs (the client's first request imports and
        # sets up what it needs) stay out of the measurement.
        run.log_metrics({"warmup/x": 1.0}, step=0, step_key="warmup/step")
        run.flush(60)
        start = time.perf_counter()
        for i in range(opts.rows):
            run.log_metrics(data[i], step=i, step_key="train/step")
        logged = time.perf_counter() - start
        drained = run.flush(timeout=300)
        ours = total / (time.perf_counter() - start)
        summary = run.finish()
        stored = sum(
            len(client.get_metric_history(run.handle.backends["mlflow"]["run_id"], key))
            for key in data[0]
        )
    rows = [
        ["raw `MlflowClient.log_metric`, one request per metric", opts.per_call, f"{per_call:,.0f}", f"{per_call / ceiling:.0%}"],
        ["raw `MlflowClient.log_batch` of 1000 (the ceiling)", total, f"{ceiling:,.0f}", "100%"],
        ["tracking-core, 20 metrics per call, batched by its worker", total, f"{ours:,.0f}", f"{ours / ceiling:.0%}"],
    ]
    print(table(
        "MLflow delivery throughput (metrics per second, real `mlflow server`, SQLite, 1 worker)",
        "python benchmarks/bench_delivery.py",
        ["sender", "metrics", "metrics/s", "vs ceiling"],
        rows,
        f"tracking-core: the training thread logged {opts.rows} calls in {logged * 1000:.0f} ms; "
        f"delivery drained={drained}, backlog at finish: "
        f"{summary.backends['mlflow']['undelivered']} records; read back from the server: "
        f"{stored} of {total} values. Goal: ≥ 90% of the ceiling, no backlog at finish.",
    ))


if __name__ == "__main__":
    main()
