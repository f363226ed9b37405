"""Logs into a nearly full disk and kills the delivery process in the middle of the outage
(tests/faults/test_spill.py, test_full_disk_and_the_delivery_process_killed_during_the_outage_lose_nothing):
the pid it killed and the finish summary.

Usage: python spill.py TRACKING_DIR STEPS
"""

from __future__ import annotations

import os
import signal
import sys
import time

from fault_prelude import delivery_pid, report, summ

import tracking_core

td, steps = sys.argv[1], int(sys.argv[2])


def free_bytes() -> int:
    st = os.statvfs(td)
    return st.f_bavail * st.f_frsize


run = tracking_core.start_run(backends=["faulty"], tracking_dir=td, config={"lr": 0.1})
killed: int | None = None
full_at: int | None = None
for step in range(steps):
    run.log_metrics({f"m{k}": step + k / 10 for k in range(8)}, step=step)
    if full_at is None and step % 25 == 0 and step > 300 and free_bytes() < 24 * 1024:
        full_at = step  # the disk is full: what is logged from now on goes elsewhere
    if killed is None and full_at is not None and step == full_at + 400:
        time.sleep(1.2)  # the pump has put those steps elsewhere
        killed = delivery_pid(run)
        os.kill(killed, signal.SIGKILL)  # in the middle of the outage (it is started again)
    time.sleep(0.001)
summary = run.finish(timeout=20)
report(killed=killed, summary=summ(summary))
