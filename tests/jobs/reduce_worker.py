"""A rank of one torchrun world of 4, all the actor role, logging reduced values (see
test_reduce_ranks.py): uneven weights with a zero, rank 2 skips step 2, only rank 3 logs
``only/three``, rank 1 exits at step 4 without a word (``os._exit``). Rank 0 also drives the run."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

STEPS = 6
WEIGHTS = [3.0, 0.0, 5.0, 2.0]
DIES, SKIPS = (1, 4), (2, 2)


def loss(rank: int, step: int) -> float:
    return (rank + 1) * 0.37 + step / 7


def main() -> int:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    import tracking_core as tc

    driver = tc.start_run(config={"job": "reduce"}) if rank == 0 else None
    dist.barrier()  # the run started before the role attaches
    role = tc.attach(role="actor", collect=False)
    for step in range(STEPS):
        if (rank, step) == DIES:
            os._exit(0)  # no finish, no exit hooks
        if (rank, step) == SKIPS:
            time.sleep(0.2)
            continue
        with role.timer("rollout", step=step):
            time.sleep(0.01 * (rank + 1))
        values = {
            "train/loss": tc.Mean(loss(rank, step), weight=WEIGHTS[rank]),
            "train/tokens": tc.Sum(WEIGHTS[rank]),
            "train/loss_max": tc.Max(loss(rank, step)),
            "train/loss_min": tc.Min(loss(rank, step)),
            "rollout/reward": tc.Quantiles([loss(rank, step) * k for k in range(1, 11)]),
            "train/lr": 0.5,
        }
        if rank == 3:
            values["only/three"] = tc.Sum(step)
        role.log_metrics(values, step=step)
        time.sleep(0.2)
    if rank == 0:
        time.sleep(1.0)  # the writer finishes after the others published their last step
    role.finish()
    if driver is not None:
        summary = driver.finish(timeout=30)
        Path(os.environ["REPORT_DIR"], "0.json").write_text(
            json.dumps({"run_id": driver.run_id, "status": summary.status.value})
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
