"""A thread logging to the jsonl backend (pausing PAUSE seconds every 20 calls; 0: flat out)
while the main thread calls ``finish(timeout=2)`` after SECONDS, and for 0.5 s after it
(tests/faults/test_flat_out.py: the finish tests). Prints how long finish took, the calls made
and the finish summary.

Usage: python flat_out_finish.py TRACKING_DIR SECONDS PAUSE
"""

from __future__ import annotations

import sys
import threading
import time

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["jsonl"], tracking_dir=sys.argv[1], export=False)
stop = threading.Event()
calls = 0


def loop() -> None:
    global calls
    pause = float(sys.argv[3])
    hard_stop = time.monotonic() + 30  # an intake that never lets finish return: end anyway
    while not stop.is_set() and time.monotonic() < hard_stop:
        run.log_metrics({"x": calls}, step=calls)
        calls += 1
        if pause and not calls % 20:
            time.sleep(pause)


t = threading.Thread(target=loop)
t.start()
time.sleep(float(sys.argv[2]))
began = time.monotonic()
summary = run.finish(timeout=2)
took = time.monotonic() - began
time.sleep(0.5)  # the thread goes on logging after finish
stop.set()
t.join()
report(took=took, calls=calls, summary=summ(summary))
