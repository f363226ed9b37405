"""A rank of one torchrun world of 4 with Megatron's parallel state (TP and PP from the
environment), all the actor role, logging reduced values with no group given (see
test_reduce_ranks.py): the reduction follows Megatron's data-parallel group, and only the ranks of
tensor-parallel rank 0 on the last pipeline stage count. The other ranks log a value of their own
(``REPLICA``) that would change every result if it were counted."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

STEPS = 3
REPLICA = 1000.0


def value(dp: int, step: int) -> float:
    return (dp + 1) * 0.31 + step / 9


def weight(dp: int) -> float:
    return [3.0, 5.0][dp]


def main() -> int:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    from megatron.core import parallel_state as ps

    ps.initialize_model_parallel(
        tensor_model_parallel_size=int(os.environ["TP"]), pipeline_model_parallel_size=int(os.environ["PP"])
    )
    import tracking_core as tc

    driver = tc.start_run(config={"job": "megatron-reduce"}) if rank == 0 else None
    dist.barrier()  # the run started before the role attaches
    role = tc.attach(role="actor", collect=False)
    dp = ps.get_data_parallel_rank(with_context_parallel=True)
    counts = ps.get_tensor_model_parallel_rank() == 0 and ps.is_pipeline_last_stage(ignore_virtual=True)
    for step in range(STEPS):
        v = value(dp, step) if counts else REPLICA
        role.log_metrics({"train/loss": tc.Mean(v, weight=weight(dp)), "train/tokens": tc.Sum(weight(dp) if counts else REPLICA)}, step=step)
        time.sleep(0.1)
    Path(os.environ["REPORT_DIR"], f"rank{rank}.json").write_text(json.dumps({"writer": role.is_writer, "dp": dp, "counts": counts}))
    dist.barrier()  # every rank published its last step
    if role.is_writer:
        time.sleep(0.5)
    role.finish()
    dist.barrier()  # the writer finished before the driver does
    if driver is not None:
        summary = driver.finish(timeout=30)
        Path(os.environ["REPORT_DIR"], "0.json").write_text(json.dumps({"run_id": driver.run_id, "status": summary.status.value}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
