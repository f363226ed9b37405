"""Tables and artifacts: what the training thread pays, side by side with the raw tracker calls,
and artifact delivery throughput to a real MLflow server against raw `log_artifact`.

* the training thread's cost of `log_table` of 64 rows x 2 KB of text (goal: <= 20 µs p50),
  against building and logging a `wandb.Table` (offline) and `MlflowClient.log_table`;
* the training process's CPU per table (the pump's conversion and redaction included; the
  trackers' client code runs in the delivery process);
* `log_artifact` of a 1 GB file (goal: <= 1 ms), against the raw `MlflowClient.log_artifact`;
* artifact delivery throughput to `mlflow server` (goal: >= 80% of raw `log_artifact`): files
  logged one after the other, timed until `flush` returns, against the same files uploaded
  directly, in alternating rounds.

    python benchmarks/bench_records.py [--tables 300] [--files 4] [--file-mib 64] [--rounds 2]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

from common import pct, per_call, ratio, table, us

logging.getLogger("tracking_core").setLevel(logging.ERROR)


# About 1 KB each, shaped like a math-and-code rollout: prose, `=` and `:`, code, a URL.
PROMPT = (
    "Solve the problem and show your reasoning. A train leaves the station at 3 pm and travels "
    "at 60 km/h; a second train leaves an hour later at 80 km/h on the same track. When does the "
    "second train catch up, and how far from the station are they then? "
) * 5
RESPONSE = (
    "<think>Let x be the time in hours after 3 pm. Then 60 * x = 80 * (x - 1), so x = 4.\n"
    "```python\ndef meet(v1: float, v2: float, head: float = 1.0) -> float:\n"
    "    return v2 * head / (v2 - v1)\n```\n</think>\n"
    "Answer: {'time': '7 pm', 'distance_km': 240} -- see https://example.org/trains for more.\n"
) * 4


def sample_rows(i: int) -> list[dict[str, object]]:
    return [
        {"prompt": f"{i}-{r} " + PROMPT[:1000], "response": RESPONSE[:1000], "reward": r / 64, "length": 1000 + r, "truncated": r % 7 == 0}
        for r in range(64)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=300)
    parser.add_argument("--files", type=int, default=4, help="files per delivery round")
    parser.add_argument("--file-mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    opts = parser.parse_args()

    import tracking_core
    from tests.helpers.mlflow_server import MlflowServer

    rows = [sample_rows(i) for i in range(opts.tables + 50)]
    out: list[list[object]] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with MlflowServer(tmp / "server") as server:
            from mlflow.tracking import MlflowClient

            client = MlflowClient(server.uri)
            exp = client.create_experiment("bench-records")

            # -- log_table: the caller's cost ------------------------------------------------
            run = tracking_core.start_run(
                backends=["mlflow"], tracking_dir=tmp / "tc", options={"mlflow_tracking_uri": server.uri}, export=False
            )
            cpu0 = time.process_time()
            ours = per_call(lambda i: run.log_table("rollout/samples", rows[i], step=i), opts.tables)
            # What the call cannot do without, timed in the same state (the pump still busy with
            # those tables): a copy of each row, kept as the queue keeps it.
            kept: list[object] = []
            copy0 = time.process_time()
            copies = per_call(lambda i: kept.append(list(map(dict.copy, rows[i]))), opts.tables)
            copy_cpu = time.process_time() - copy0
            kept.clear()
            run.flush(600)
            cpu = (time.process_time() - cpu0 - copy_cpu) / (opts.tables + 50)
            out.append(["tracking-core `log_table` (64 rows x 2 KB), rows built long before", us(pct(ours, 50)), us(pct(ours, 99)), "1.00x"])
            out.append(["the rows' copy alone (`dict.copy` of each, kept), same state", us(pct(copies, 50)), us(pct(copies, 99)), ratio(pct(copies, 50), pct(ours, 50))])
            # As a trainer logs them: each table built just before its call, one call a step.
            fresh: list[float] = []
            for i in range(min(opts.tables, 200)):
                built = sample_rows(i)
                start = time.perf_counter()
                run.log_table("rollout/fresh", built, step=i)
                fresh.append(time.perf_counter() - start)
                time.sleep(0.005)
            run.flush(600)
            out.append(["tracking-core `log_table`, rows built just before, a call every 5 ms", us(pct(fresh, 50)), us(pct(fresh, 99)), "-"])

            raw_id = client.create_run(exp).info.run_id
            n_raw = max(10, opts.tables // 10)
            raw_mlflow = per_call(
                lambda i: client.log_table(raw_id, data={k: [r[k] for r in rows[i]] for k in rows[i][0]}, artifact_file=f"t/{i}.json"),
                n_raw,
                warmup=3,
            )
            out.append([f"raw `MlflowClient.log_table` ({n_raw} calls)", us(pct(raw_mlflow, 50)), us(pct(raw_mlflow, 99)), ratio(pct(raw_mlflow, 50), pct(ours, 50))])

            os.environ["WANDB_MODE"] = "offline"
            os.environ["WANDB_DIR"] = str(tmp / "wandb")
            os.environ["WANDB_SILENT"] = "true"
            import wandb

            wrun = wandb.init(project="bench-records")
            columns = list(rows[0][0])
            raw_wandb = per_call(
                lambda i: wrun.log({"samples": wandb.Table(columns=columns, data=[list(r.values()) for r in rows[i]])}, step=i),
                n_raw,
                warmup=3,
            )
            wrun.finish()
            out.append([f"raw `wandb.Table` + `run.log`, offline ({n_raw} calls)", us(pct(raw_wandb, 50)), us(pct(raw_wandb, 99)), ratio(pct(raw_wandb, 50), pct(ours, 50))])
            notes.append(
                f"training-process CPU per table with tracking-core: {cpu * 1e6:,.0f} µs (the pump's "
                f"conversion and redaction; delivery runs in its own process)"
            )

            # -- log_artifact of 1 GB: the caller's cost ------------------------------------
            big = tmp / "big.bin"
            with open(big, "wb") as fh:
                fh.truncate(1 << 30)  # sparse: only opening it is timed
            art = per_call(lambda i: run.log_artifact(big, name=f"ckpt-{i}"), 20, warmup=2)
            run.finish(timeout=5)  # the 22 copies of a sparse GB are not what this measures
            big.unlink()
            out.append(["tracking-core `log_artifact` of a 1 GB file", us(pct(art, 50)), us(pct(art, 99)), "-"])

            # -- artifact delivery throughput ----------------------------------------------
            size = opts.file_mib << 20
            files = []
            for i in range(opts.files):
                path = tmp / f"file-{i}.bin"
                with open(path, "wb") as fh:
                    fh.write(os.urandom(size))
                files.append(path)
            total_mib = opts.files * opts.file_mib
            raw_rates: list[float] = []
            our_rates: list[float] = []

            def raw_round() -> None:
                run_id = client.create_run(exp).info.run_id
                start = time.perf_counter()
                for path in files:
                    client.log_artifact(run_id, str(path), artifact_path="files")
                raw_rates.append(total_mib / (time.perf_counter() - start))

            def our_round(r: int) -> None:
                run = tracking_core.start_run(
                    backends=["mlflow"], tracking_dir=tmp / f"tc-art{r}", options={"mlflow_tracking_uri": server.uri}, export=False
                )
                run.log_metrics({"warmup": 1.0}, step=0)
                run.flush(60)
                start = time.perf_counter()
                for path in files:
                    run.log_artifact(path)
                ok = run.flush(600)
                our_rates.append(total_mib / (time.perf_counter() - start))
                run.finish()
                if not ok:
                    notes.append(f"round {r + 1}: flush did not complete")

            for r in range(opts.rounds):
                if r % 2 == 0:
                    raw_round()
                    our_round(r)
                else:
                    our_round(r)
                    raw_round()
    print(table(
        "Tables and artifacts: the training thread's cost",
        "python benchmarks/bench_records.py",
        ["call", "p50", "p99", "raw / ours (p50)"],
        out,
        "; ".join(notes) + ". Goals: `log_table` <= 20 µs p50, `log_artifact` <= 1 ms whatever the size.",
    ))
    ratios = [o / r for o, r in zip(our_rates, raw_rates, strict=True)]
    print(table(
        f"Artifact delivery to a real `mlflow server` ({opts.files} files x {opts.file_mib} MiB a round, {opts.rounds} rounds)",
        "python benchmarks/bench_records.py",
        ["sender", "MiB/s (median)", "range", "vs raw"],
        [
            ["raw `MlflowClient.log_artifact`", f"{statistics.median(raw_rates):,.0f}", f"{min(raw_rates):,.0f} .. {max(raw_rates):,.0f}", "100%"],
            ["tracking-core `log_artifact` until `flush` returns", f"{statistics.median(our_rates):,.0f}", f"{min(our_rates):,.0f} .. {max(our_rates):,.0f}",
             f"{statistics.median(ratios):.0%} (rounds: {', '.join(f'{x:.0%}' for x in ratios)})"],
        ],
        f"tracking-core's time includes the snapshot (a hard link here) and the delivery process's upload. "
        f"Goal: >= 80% of raw. Total per round {total_mib} MiB.",
    ))


if __name__ == "__main__":
    main()
