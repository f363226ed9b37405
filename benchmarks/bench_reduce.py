"""What reduced values cost: the training thread's cost of a log call with reducers beside a
plain one (one process), and the writer's CPU, messages and bytes a step at N local ranks.

    python benchmarks/bench_reduce.py              # both; --ranks 2,4,8,16 --steps 200 (--ranks "": the caller only)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEYS = 20  # reduced keys a step, as a PPO step logs


def _example(tc: Any, v: float, reduced: bool) -> dict[str, object]:
    """The call of the reduction's contract: five reduced values and a plain one (rewards: 8)."""
    rewards = [v + i for i in range(8)]
    if not reduced:
        return {"train/loss": v, "train/tokens": 512.0, "rollout/reward_max": v, "rollout/reward_min": v,
                "rollout/reward": v, "train/lr": 1e-6}  # fmt: skip
    return {"train/loss": tc.Mean(v, weight=512.0), "train/tokens": tc.Sum(512.0), "rollout/reward_max": tc.Max(v),
            "rollout/reward_min": tc.Min(v), "rollout/reward": tc.Quantiles(rewards), "train/lr": 1e-6}  # fmt: skip


def _means(tc: Any, v: float, reduced: bool, keys: int) -> dict[str, object]:
    return {f"train/k{i}": tc.Mean(v, weight=3) if reduced else v for i in range(keys)}


SHAPES: dict[str, Callable[[Any, float, bool], dict[str, object]]] = {
    "the contract's example (Mean, Sum, Max, Min, Quantiles of 8, one plain)": _example,
    "5 Mean values": lambda tc, v, reduced: _means(tc, v, reduced, 5),
    f"{KEYS} Mean values": lambda tc, v, reduced: _means(tc, v, reduced, KEYS),
}


def caller(shape: Callable[[Any, float, bool], dict[str, object]], made_in_call: bool,
           calls: int = 20_000) -> tuple[float, float]:
    """Median µs of one log_metrics call of ``shape``'s plain values and of its reduced values,
    each pass on a run of its own; ``made_in_call``: the values are made inside the timed span
    (as the dict literal of user code makes them), else just before it."""
    import tracking_core as tc

    out = []
    for reduced in (False, True):
        with tempfile.TemporaryDirectory() as td:
            run = tc.start_run(backends=["jsonl"], tracking_dir=td, delivery="thread")
            times = []
            for step in range(calls):
                v = 0.5 + step * 1e-3
                if made_in_call:
                    t0 = time.perf_counter()
                    run.log_metrics(shape(tc, v, reduced), step=step)
                else:
                    values = shape(tc, v, reduced)
                    t0 = time.perf_counter()
                    run.log_metrics(values, step=step)
                times.append(time.perf_counter() - t0)
                if step % 500 == 0:
                    # the background threads (the pump, the reducer's gatherer, which wakes every
                    # 0.1 s) do their share between bursts, as between a job's steps: the calls
                    # are timed as training makes them, not against a thread still busy with the
                    # burst before
                    time.sleep(0.25)
            out.append(statistics.median(times) * 1e6)
            run.finish()
    return out[0], out[1]


def worker(steps: int) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    import tracking_core as tc

    os.environ["TRACKING_CORE_WRITER"] = "1" if rank == 0 else "0"
    role = tc.attach(role="actor", collect=False, handle=os.environ["HANDLE"])
    for step in range(steps):
        role.log_metrics(_means(tc, 0.5 + step * 1e-3, True, KEYS), step=step)
        time.sleep(0.02)
    g = role._gatherer
    if rank == 0:
        time.sleep(1.0)
        tid = g.thread.native_id
        ticks = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(ticks[11]) + int(ticks[12])) / os.sysconf("SC_CLK_TCK")
        sample = {"r": 1, "a": None, "s": 1, "m": {f"train/k{i}": ["mean", 1.5, 3.0] for i in range(KEYS)}, "ph": {}, "sp": [], "o": 0.0}
        role.finish()
        print(json.dumps({"cpu_s": cpu, "steps": steps, "bytes": len(json.dumps(sample, separators=(",", ":")))}))
    else:
        role.finish()


def writer_cost(ranks: int, steps: int) -> dict[str, float]:
    import tracking_core as tc

    with tempfile.TemporaryDirectory() as td:
        run = tc.start_run(backends=["jsonl"], tracking_dir=td, delivery="thread")
        env = {**os.environ, "HANDLE": run.handle.to_json(), "BENCH_STEPS": str(steps), "OMP_NUM_THREADS": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", __file__, "--worker"],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        run.finish()
    line = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if not line:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    got = json.loads(line[-1])
    # each step: ranks-1 pops (the writer's own goes straight in) and one queue_len a poll
    return {"ranks": ranks, "cpu_ms_step": got["cpu_s"] / steps * 1e3, "pops_step": ranks - 1, "bytes_msg": got["bytes"]}


def main() -> None:
    if "--worker" in sys.argv:
        worker(int(os.environ["BENCH_STEPS"]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", default="2,4,8,16")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    print("| log_metrics call | plain values, p50 | reduced values, p50 | difference (goal: at most +2 µs) "
          "| with the values made in the timed span: plain, reduced, difference |")
    for name, shape in SHAPES.items():
        plain, reduced = caller(shape, made_in_call=False)
        plain_made, reduced_made = caller(shape, made_in_call=True)
        print(f"| {name} | {plain:.2f} µs | {reduced:.2f} µs | {reduced - plain:+.2f} µs "
              f"| {plain_made:.2f} µs, {reduced_made:.2f} µs, {reduced_made - plain_made:+.2f} µs |")
    print("| ranks | writer's reducing thread CPU a step | store pops a step | bytes a rank's message |")
    for n in (int(x) for x in args.ranks.split(",") if x):  # --ranks "": the caller's cost only
        r = writer_cost(n, args.steps)
        print(f"| {n} | {r['cpu_ms_step']:.2f} ms | {r['pops_step']} | {r['bytes_msg']} |")


if __name__ == "__main__":
    main()
