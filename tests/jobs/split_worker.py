"""A rank of one torchrun world of 4 split into roles: ranks 0-1 the actor, 2-3 the critic.

Rank 0 also starts the job's run (its id from torchrun's job id; the other ranks find it from
the same id). Every rank creates both roles' groups; with GROUP=1 each attaches with its role's
group (the writer: the group's rank 0) and tries the other role's group (a ValueError), with
GROUP=0 without one (the world's rank 0 writes, so the critic has no writer). Each logs STEPS
steps (with GROUP=1 also the sum of its role's ranks, reduced over its group) and writes
``<rank>.json`` into REPORT_DIR; the
driver finishes the run once every role has finished, and its summary goes into ``0.json``.
The ranks stay until then.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
ACTOR, CRITIC = [0, 1], [2, 3]
#: A training step's time: a role's ranks live a few seconds past their attach, as in training.
STEP_SECONDS = 0.5


def main() -> int:
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(name)s %(levelname)s: %(message)s"
    )
    steps = int(os.environ["STEPS"])
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    groups = {
        "actor": dist.new_group(ACTOR),
        "critic": dist.new_group(CRITIC),
    }  # every rank makes both
    import tracking_core

    driver = tracking_core.start_run(config={"job": "ppo"}) if rank == 0 else None
    dist.barrier()  # the run started before any role attaches
    role = "actor" if rank in ACTOR else "critic"
    # the group only where named: attach without one is as a job that never heard of groups
    named = {"group": groups[role]} if os.environ["GROUP"] == "1" else {}
    config = {"lr": 1e-6 if role == "actor" else 1e-5}
    run = tracking_core.attach(role=role, config=config, **named)
    for step in range(steps):
        values: dict[str, object] = {"train/loss": 1.0 / (step + 1), "train/rank_seen": rank}
        if named:  # summed over the role's group only: never the other role's ranks
            values["train/rank_sum"] = tracking_core.Sum(rank)
        run.log_metrics(values, step=step, step_key="train/step")
        time.sleep(STEP_SECONDS)
    run.finish()
    report: dict[str, object] = {"rank": rank, "role": role, "writer": run.is_writer}
    if named:  # the other role's group, which this rank is not in: said, not guessed
        other = "critic" if role == "actor" else "actor"
        try:
            tracking_core.attach(role=role, group=groups[other], collect=False)
        except ValueError as exc:
            report["outside"] = str(exc)
    dist.barrier()  # every role finished
    if driver is not None:
        summary = driver.finish(timeout=30)
        report.update(summary=summary.describe(), status=summary.status.value, run_id=driver.run_id)
    Path(os.environ["REPORT_DIR"], f"{rank}.json").write_text(json.dumps(report))
    dist.barrier()  # the driver finished
    return 0


if __name__ == "__main__":
    sys.exit(main())
