"""Threads that log to the jsonl backend back to back, each writing a ``MARK k step time`` line
every 1000 steps, until the test kills the process (tests/faults/test_flat_out.py: kill -9
while threads log flat out loses at most the last second).

Usage: python flat_out_kill.py TRACKING_DIR THREADS
"""

from __future__ import annotations

import os
import sys
import threading
import time

import fault_prelude  # noqa: F401 - first: it keeps the warnings and prints them at exit

import tracking_core

run = tracking_core.start_run(backends=["jsonl"], tracking_dir=sys.argv[1], export=False)


def loop(k: int) -> None:
    i = 0
    while True:
        run.log_metrics({f"t{k}": i}, step=i)
        if not i % 1000:
            os.write(1, f"MARK {k} {i} {time.time()}\n".encode())  # one write: whole lines
        i += 1


for k in range(int(sys.argv[2])):
    threading.Thread(target=loop, args=(k,), daemon=True).start()
time.sleep(3600)
