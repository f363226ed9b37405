"""The driver of a job logging to W&B: the primary and an ``actor`` writer in this process, the
job file ``$TEST_CHILD`` started for roles critic and rollout (tests/backends/test_wandb.py,
test_driver_actor_critic_rollout_processes). Prints the run id, the children's exit codes,
whether this process had a W&B service for them to inherit, and both writers' failures and
values delivered as JSON. The configs come as JSON in ``$TEST_CONFIGS``, the tracking directory
in ``$TEST_TDIR``, the delivery in ``$DRIVER_DELIVERY``, a planted key in ``$PLANTED``.

Usage: python wandb_driver.py --wandb-key KEY
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import tracking_core

cfg = json.loads(os.environ["TEST_CONFIGS"])
run = tracking_core.start_run(
    {**cfg["launch"], "wandb_key": os.environ["PLANTED"]},
    backends=["wandb"],
    tracking_dir=os.environ["TEST_TDIR"],
    options={"wandb_project": "tc-test"},
    delivery=os.environ["DRIVER_DELIVERY"],
)
run.flush(120)  # start_run does not wait for W&B: let it open, so children can inherit its service
inherited = bool(os.environ.get("WANDB_SERVICE"))  # what the children get from this process
actor = tracking_core.attach(
    role="actor",
    writer=True,
    collect=False,
    config=cfg["actor"],
    delivery=os.environ["DRIVER_DELIVERY"],
)
children = [
    subprocess.Popen(
        [sys.executable, os.environ["TEST_CHILD"], role, "--wandb-key", os.environ["PLANTED"]]
    )
    for role in ("critic", "rollout")
]
for step in range(int(os.environ["TEST_STEPS"])):
    actor.log_metrics(
        {"train/pg_loss": 1.0 / (step + 1), "train/kl": 0.01 * step},
        step=step,
        step_key="train/step",
    )
actor.log_config({**cfg["actor"], "lr": 2e-6})
codes = [c.wait(timeout=240) for c in children]
a = actor.finish()
p = run.finish()
assert a is not None  # a writer's summary
print(
    json.dumps(
        {
            "run_id": run.run_id,
            "codes": codes,
            "inherited_service": inherited,
            "failures": [a.backends["wandb"]["failures"], p.backends["wandb"]["failures"]],
            "delivered": [a.backends["wandb"]["delivered"], p.backends["wandb"]["delivered"]],
        }
    )
)
