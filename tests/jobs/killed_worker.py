"""A rank of a torchrun world of 2, the actor role, killed (SIGKILL: no finish, no exit hooks)
KILL_AFTER seconds after its last step, as a training actor at a hasty teardown. Rank 0 also
drives the run and writes its id into REPORT_DIR before the kill."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

STEPS = 3


def main() -> int:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    import tracking_core as tc

    driver = tc.start_run(config={"job": "killed"}) if rank == 0 else None
    dist.barrier()  # the run started before the role attaches
    role = tc.attach(role="actor", collect=False)
    for step in range(STEPS):
        with role.timer("train", step=step):
            time.sleep(0.05)
        role.log_metrics({"train/tokens": tc.Sum(rank + 1), "train/lr": 0.5}, step=step)
    if driver is not None:
        Path(os.environ["REPORT_DIR"], "0.json").write_text(json.dumps({"run_id": driver.run_id}))
    time.sleep(float(os.environ["KILL_AFTER"]))
    os.kill(os.getpid(), signal.SIGKILL)
    return 1


if __name__ == "__main__":
    sys.exit(main())
