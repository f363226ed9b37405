"""One thread logging rows of 20 values flat out for SECONDS, watching the process's memory
(tests/faults/test_flat_out.py: memory stays within the bound while logging flat out). Prints
the calls made, the peak growth of the resident set, whether it gave up at 400 MiB, and the
finish summary.

Usage: python flat_out_memory.py TRACKING_DIR SECONDS
"""

from __future__ import annotations

import sys
import threading
import time

from fault_prelude import report, summ

import tracking_core


def rss(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1], export=False)
row = {f"train/m{j:02d}": j * 0.5 for j in range(20)}
run.log_metrics(row, step=0)
run.flush(30)
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak (VmHWM) from here on
before = rss("VmRSS")
calls, gave_up = 0, False


def loop() -> None:
    global calls, gave_up
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        for _ in range(1000):
            run.log_metrics(row, step=calls)
            calls += 1
        if rss("VmRSS") - before > 400 << 20:  # unbounded: stop before it hurts the machine
            gave_up = True
            break


t = threading.Thread(target=loop)
t.start()
t.join()
peak = rss("VmHWM") - before
summary = run.finish(timeout=60)
report(calls=calls, peak=peak, gave_up=gave_up, summary=summ(summary))
