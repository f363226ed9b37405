"""Logs 20 steps and flushes, then makes the tracker unreachable (creates ``$FAULT_DOWN_FILE``),
logs a config and 15 seconds of steps, makes it reachable again and finishes
(tests/faults/test_completion.py,
test_a_config_logged_during_an_outage_reaches_the_tracker_when_it_is_back): what the flush
returned, the steps logged and the finish summary.

Usage: python completion_outage.py TRACKING_DIR
"""

from __future__ import annotations

import os
import sys
import time

from fault_prelude import report, summ

import tracking_core

down = os.environ["FAULT_DOWN_FILE"]
run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1])
for step in range(20):
    run.log_metrics({"loss": step / 10}, step=step)
flushed = run.flush(30)  # the run is open and everything so far delivered
open(down, "w").close()  # then an outage, longer than a few retries' backoff
run.log_config({"late_lr": 0.5})
t_down = time.monotonic()
step = 20
while time.monotonic() - t_down < 15:
    run.log_metrics({"loss": step / 10}, step=step)
    step += 1
    time.sleep(0.25)
os.remove(down)  # the tracker is back
summary = run.finish(timeout=25)
report(flushed=flushed, steps=step, summary=summ(summary))
