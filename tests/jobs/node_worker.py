"""A rank of the two-node torchrun job in test_torchrun_nodes.py (one rank per node).

Global rank 0 is the driver: it starts the job's run (its run id from torchrun's job id) and
attaches as the actor. Global rank 1 attaches as the critic's writer with no run handle: the run
is found from the same job id. Each logs ``train/loss`` and ``train/rank_seen`` for STEPS steps.

MODE=complete: both log every step, meet at a barrier, the critic exits without finish (as
slime's training actors do) and the driver finishes. Both ranks are also the role ``reward``
(one role across the two nodes, rank 0 its writer): each step they time the phase ``score``
and log ``score`` as a weighted :class:`tracking_core.Mean` and ``n`` as a ``Sum``, reduced
across the nodes through the job's store.

MODE=lost: the critic logs the first half, delivers it (flush, at most FLUSH_TIMEOUT seconds)
and says so (``critic-flushed``);
once the test has held its node's link to the server (``held``) it logs the rest, waits until
the journal holds it and says so (``critic-logged``), then waits to be killed with its node. The
driver logs every step, finishes its actor, and finishes the run (timeout FINISH_TIMEOUT) when
the test says ``finish``: after the node is gone.

Each rank writes ``report-<rank>.json`` into CONTROL_DIR (a folder of the test's, not a node's).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore")
CONTROL = Path(os.environ.get("CONTROL_DIR", "."))  # the test imports score() without it
#: A step's time: the job lasts a few of the system samplers' intervals (0.5 s in the tests).
STEP_SECONDS = 0.4


def wait_for(name: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not (CONTROL / name).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {CONTROL / name} within {timeout:.0f} s")
        time.sleep(0.05)


def say(name: str, data: object = None) -> None:
    path = CONTROL / name
    path.with_suffix(".tmp").write_text(json.dumps(data))
    path.with_suffix(".tmp").replace(path)


def score(rank: int, step: int) -> float:
    return (rank + 1) * 0.25 + step / 8


def log_steps(run: Any, steps: range, rank: int, reward: Any = None) -> None:
    import tracking_core as tc

    for step in steps:
        run.log_metrics(
            {"train/loss": 1.0 / (step + 1), "train/rank_seen": rank},
            step=step,
            step_key="train/step",
        )
        if reward is not None:
            with reward.timer("score", step=step):
                time.sleep(0.05 * (rank + 1))
            reward.log_metrics({"score": tc.Mean(score(rank, step), weight=rank + 1), "n": tc.Sum(rank + 1)}, step=step)
        time.sleep(STEP_SECONDS)


def main() -> int:
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
    )
    logging.getLogger("tracking_core").setLevel(logging.INFO)
    mode = os.environ["MODE"]
    steps = int(os.environ["STEPS"])
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    import tracking_core

    report: dict[str, object] = {
        "rank": rank,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "elastic_run_id": os.environ.get("TORCHELASTIC_RUN_ID"),
    }
    if rank == 0:
        driver = tracking_core.start_run(config={"job": "ppo", "nodes": 2, "lr": 1e-6})
        run = tracking_core.attach(role="actor", config={"lr": 1e-6, "tp": 1})
        report["run_id"] = driver.run_id
        if mode == "complete":
            reward = tracking_core.attach(role="reward", collect=False)
            log_steps(run, range(steps), rank, reward)
            dist.barrier()  # the critic has logged every step, node1's reward rank has finished
            reward.finish()
        else:
            log_steps(run, range(steps), rank)
        run.finish()
        if mode == "lost":
            wait_for("finish")
        summary = driver.finish(timeout=float(os.environ.get("FINISH_TIMEOUT", "30")))
        report.update(
            summary=summary.describe(), status=summary.status.value, drained=summary.drained
        )
    else:
        run = tracking_core.attach(role="critic", config={"lr": 1e-5, "pp": 1}, writer=True)
        report["run_id"] = run.run_id
        report["tracking_dir"] = str(getattr(run, "tracking_dir", ""))
        if mode == "complete":
            reward = tracking_core.attach(role="reward", collect=False)
            log_steps(run, range(steps), rank, reward)
            reward.finish()  # publishes its last step
            say(f"report-{rank}.json", report)
            dist.barrier()
            return 0  # exits without finish: its writer delivers on the way out
        half = steps // 2
        log_steps(run, range(half), rank)
        report["flushed"] = run.flush(timeout=float(os.environ.get("FLUSH_TIMEOUT", "120")))
        say("critic-flushed", report)
        wait_for("held")
        log_steps(run, range(half, steps), rank)
        time.sleep(2.0)  # the journal takes what was logged within one flush interval (0.5 s)
        say("critic-logged", report)
        time.sleep(600)  # killed with its node
    say(f"report-{rank}.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
