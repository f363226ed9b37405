"""A rank of a role's world, started by torchrun in the distributed tests.

Every rank initialises gloo and Megatron's parallel state, attaches to the job's run (from
$TRACKING_CORE_RUN), makes the one explicit collective call, logs STEPS steps of metrics and exits
without calling finish (as slime's training actors do).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")


def main() -> int:
    role = os.environ["ROLE"]
    tp = int(os.environ.get("TP", "1"))
    pp = int(os.environ.get("PP", "1"))
    steps = int(os.environ.get("STEPS", "5"))
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    from megatron.core import parallel_state as ps

    ps.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp)
    import tracking_core
    from tracking_core.distributed import gather_role_summary

    config = argparse.Namespace(lr=1e-6 if role == "actor" else 1e-5, tp=tp, pp=pp, seed=7)
    if os.environ.get("MISMATCH_RANK") == str(rank):
        config.lr = 3e-6
    run = tracking_core.attach(role=role, config=config)
    summary = gather_role_summary(run, config, role=role)
    for step in range(steps):
        run.log_metrics({"train/loss": 1.0 / (step + 1), "train/rank_seen": rank}, step=step, step_key="train/step")
    report = {"rank": rank, "writer": run.is_writer, "mismatches": summary.mismatches, "hosts": summary.hosts}
    with open(os.path.join(os.environ["REPORT_DIR"], f"{role}-{rank}.json"), "w") as fh:
        json.dump(report, fh)
    dist.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
