"""One rank of the demo's actor or critic group, started by torch's elastic launcher.

Each group is its own gloo world with Megatron's parallel state initialised from the role's
effective args (tensor / pipeline parallel sizes). The two groups exchange rollouts and values
through files in the exchange directory (atomic renames), the way slime's actor and critic
exchange them through Ray. Every rank attaches to the job's run; only the role's writer (the
Megatron main rank) logs, the others get a no-op run.
"""

from __future__ import annotations

import argparse
import logging
import os
import pickle
import sys
import time
import warnings
from pathlib import Path
from typing import Any

POLL = 0.02


def _wait_for(path: Path, abort: Path, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if abort.exists():
            raise SystemExit(f"aborted: {abort.read_text().strip()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {path}; is the other group running?")
        time.sleep(POLL)
    import torch

    return torch.load(path, weights_only=False)


def _publish(path: Path, obj: Any) -> None:
    import torch

    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--role", choices=("actor", "critic"), required=True)
    p.add_argument("--exchange", type=Path, required=True)
    p.add_argument("--role-args", type=Path, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--timeout", type=float, default=600.0)
    return p.parse_args(argv)


def _layout(ns: argparse.Namespace, world: int) -> tuple[int, int]:
    tp = int(getattr(ns, "tensor_model_parallel_size", 1) or 1)
    pp = int(getattr(ns, "pipeline_model_parallel_size", 1) or 1)
    if world % (tp * pp) != 0:
        logging.getLogger("tracking_core.demo").warning(
            "world size %d is not a multiple of tp=%d x pp=%d; using tp=1, pp=1", world, tp, pp
        )
        return 1, 1
    return tp, pp


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    warnings.filterwarnings("ignore")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    role_ns = pickle.loads(opts.role_args.read_bytes())[opts.role]
    tp, pp = _layout(role_ns, world)
    from megatron.core import parallel_state as ps

    ps.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp)
    dp_group = ps.get_data_parallel_group()
    dp_rank, dp_size = ps.get_data_parallel_rank(), ps.get_data_parallel_world_size()

    import tracking_core

    from .ppo import Bandit, global_mean, mlp, ppo_update, rollout, value_update

    run = tracking_core.attach(role=opts.role, args=role_ns, config=role_ns)
    bandit = Bandit(seed=int(role_ns.seed))
    torch.manual_seed(int(role_ns.seed))  # identical initial replicas on every rank
    hidden = int(role_ns.hidden_size)
    net = mlp(bandit.dim, hidden, bandit.arms if opts.role == "actor" else 1)
    optimizer = torch.optim.Adam(net.parameters(), lr=float(role_ns.lr))
    gen = torch.Generator().manual_seed(int(role_ns.seed) * 1000 + dp_rank)
    shard = max(1, int(role_ns.rollout_batch_size) // dp_size)
    abort = opts.exchange / "abort"
    started = time.monotonic()

    for step in range(opts.steps):
        if opts.role == "actor":
            with run.timer("rollout", step=step, step_key="rollout/step"):  # this rank's time in it
                batch = rollout(net, bandit, shard, gen)
            shards = [None] * world
            dist.all_gather_object(shards, (dp_rank, batch))
            full = {}
            if rank == 0:
                ordered = dict(sorted(shards, key=lambda s: s[0]))  # one shard per dp rank
                full = {k: torch.cat([b[k] for b in ordered.values()]) for k in batch}
                _publish(opts.exchange / f"rollout-{step}.pt", full)
            # Every rank logs its shard's values; the writer logs them reduced over the role's
            # data-parallel ranks (off the training thread, no collective): the job's mean
            # weighted by each shard's size, and the quantiles of every rank's rewards.
            n = len(batch["r"])
            run.log_metrics(
                {
                    "rollout/reward_mean": tracking_core.Mean(float(batch["r"].mean()), weight=n),
                    "rollout/optimal_rate": tracking_core.Mean(float(batch["optimal"].mean()), weight=n),
                    "rollout/reward_all": tracking_core.Quantiles(batch["r"]),
                },
                step=step,
                step_key="rollout/step",
            )
            # What the policy did (this rank's shard): a few samples and the reward distribution.
            samples = [
                {
                    "context": " ".join(f"{c:+.2f}" for c in batch["x"][i].tolist()),
                    "action": int(batch["a"][i]),
                    "reward": round(float(batch["r"][i]), 4),
                    "optimal": bool(batch["optimal"][i]),
                }
                for i in range(min(8, len(batch["a"])))
            ]
            run.log_table("rollout/samples", samples, step=step, step_key="rollout/step")
            run.log_histogram("rollout/reward", batch["r"], step=step, step_key="rollout/step")
            box = [_wait_for(opts.exchange / f"values-{step}.pt", abort, opts.timeout) if rank == 0 else None]
            dist.broadcast_object_list(box, src=0)
            values = box[0][dp_rank * shard : (dp_rank + 1) * shard]
            with run.timer("train", step=step, step_key="train/step"):
                stats = ppo_update(
                    net,
                    optimizer,
                    batch,
                    batch["r"] - values,
                    clip=float(role_ns.eps_clip),
                    epochs=int(role_ns.ppo_epochs),
                    entropy_coef=float(role_ns.entropy_coef),
                    kl_coef=float(role_ns.kl_coef),
                    group=dp_group,
                )
            line = f"reward {float(batch['r'].mean()):+.3f} optimal {float(batch['optimal'].mean()):.2f} on its shard"
        else:
            box = [_wait_for(opts.exchange / f"rollout-{step}.pt", abort, opts.timeout) if rank == 0 else None]
            dist.broadcast_object_list(box, src=0)
            full = box[0]
            with torch.no_grad():
                values = net(full["x"]).squeeze(1)
            if rank == 0:
                _publish(opts.exchange / f"values-{step}.pt", values)
            mine = slice(dp_rank * shard, (dp_rank + 1) * shard)
            with run.timer("train", step=step, step_key="train/step"):
                stats = value_update(
                    net,
                    optimizer,
                    full["x"][mine],
                    full["r"][mine],
                    epochs=int(role_ns.value_epochs),
                    group=dp_group,
                )
            stats["value_mean"] = float(values.mean())
            line = f"value_loss {stats['value_loss']:.4f}"
        stats = global_mean(stats, dp_group)
        run.log_metrics(
            {f"train/{k}": v for k, v in stats.items()},
            step=step,
            step_key="train/step",
        )
        if run.is_writer:
            print(
                f"[{opts.role}] step {step}/{opts.steps - 1} {line} "  # the step the trackers record
                f"({time.monotonic() - started:.1f} s)",
                flush=True,
            )

    summary = run.finish()
    if summary is not None:
        # This writer's part only: how the run ended is the driver's to say.
        head = f"{opts.role} writer {summary.status.value.lower()}"
        print(f"[{opts.role}] tracking: {summary.describe(head)}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
