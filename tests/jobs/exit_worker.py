"""A rank of a 2-rank torchrun world that exits while threads call the job's store.

Each rank starts a thread that calls the store flat out (through the package's
``store_thread``, or, with PLAIN=1, as a plain daemon thread), attaches (rank 0 as role ``a``, the
world's writer; rank 1 as role ``b``, a non-writer whose role never gets a writer, so it watches
the store), logs a reduced value (its gatherer's thread) and returns without ``finish`` or
``destroy_process_group``, as slime's training actors do. It writes ``<rank>.json`` into
REPORT_DIR: the names of the live threads that call the store and whether each was started
through ``store_thread``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")


def main() -> int:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    from torch.distributed.distributed_c10d import _get_default_store

    import tracking_core
    from tracking_core import attendance

    store = _get_default_store()

    def flat_out() -> None:
        while not attendance.stopping.is_set():
            store.check(["tracking-core-test/none"])

    def plain() -> None:  # told nothing at the exit
        while True:
            store.check(["tracking-core-test/none"])

    if os.environ.get("PLAIN") == "1":
        threading.Thread(target=plain, name="plain-store-calls", daemon=True).start()
    else:
        attendance.store_thread(flat_out, (), "test-store-calls")
    run = tracking_core.attach(role="a" if rank == 0 else "b", config={"rank": rank})
    run.log_metrics({"train/n": tracking_core.Sum(1)}, step=0)
    time.sleep(0.3)  # the gatherer has ticked and the watcher polled
    named = ("tracking-core-attendance", "tracking-core-reduce", "test-store-calls")
    live = {t.name: t in attendance._threads for t in threading.enumerate() if t.name in named}
    Path(os.environ["REPORT_DIR"], f"{rank}.json").write_text(json.dumps(live))
    dist.barrier()
    sys.stdout.write(f"exiting {time.monotonic()}\n")  # one write: the two ranks share the pipe
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
