"""A primary and an actor logging for about 2 s to ``faulty`` while it is down, each start,
attach and finish timed (tests/faults/test_bounds.py: a tracker that is down never holds up start
or finish). Prints the times and both finish summaries.

Usage: python bounds_down.py TRACKING_DIR
"""

from __future__ import annotations

import sys
import time

from fault_prelude import report, summ

import tracking_core

td = sys.argv[1]
t0 = time.monotonic()
run = tracking_core.start_run(backends=["faulty"], tracking_dir=td, config={"lr": 0.1})
start_took = time.monotonic() - t0
t0 = time.monotonic()
actor = tracking_core.attach(role="actor", writer=True, collect=False, config={"lr": 0.2})
attach_took = time.monotonic() - t0
for step in range(50):  # ~2 s of failures: every circuit is open by the end
    run.log_metrics({"x": float(step)}, step=step)
    actor.log_metrics({"loss": step / 10}, step=step)
    time.sleep(0.04)
t0 = time.monotonic()
secondary = actor.finish(timeout=5)
secondary_took = time.monotonic() - t0
t0 = time.monotonic()
primary = run.finish(timeout=5)
primary_took = time.monotonic() - t0
report(start_took=start_took, attach_took=attach_took, secondary_took=secondary_took,
       primary_took=primary_took, secondary=summ(secondary), primary=summ(primary))
