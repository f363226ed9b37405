"""Logs into a nearly full disk until 400 steps after it filled, prints
``PIDS <delivery pid> <steps>`` and sleeps to be killed (tests/faults/test_spill.py,
test_sync_delivers_a_spill_journal_left_behind).

Usage: python spill_left_behind.py TRACKING_DIR
"""

from __future__ import annotations

import os
import sys
import time

from fault_prelude import delivery_pid

import tracking_core

td = sys.argv[1]


def free_bytes() -> int:
    st = os.statvfs(td)
    return st.f_bavail * st.f_frsize


run = tracking_core.start_run(backends=["faulty"], tracking_dir=td, config={"lr": 0.1})
step = 0
full_at: int | None = None
while full_at is None or step < full_at + 400:
    run.log_metrics({f"m{k}": step + k / 10 for k in range(8)}, step=step)
    if full_at is None and step % 25 == 0 and step > 300 and free_bytes() < 24 * 1024:
        full_at = step
    step += 1
    time.sleep(0.001)
time.sleep(1.2)  # the pump has put every step somewhere
print(f"PIDS {delivery_pid(run)} {step}", flush=True)
time.sleep(3600)
