"""An actor's flush while the primary's trackers are slow to open (``FAULT_SLOW_CONNECT``)
(tests/faults/test_bounds.py: a writer's flush waits for a primary that is slow to open). Prints
what the flush returned, how long it took and the (backend, step) pairs delivered by then.

Usage: python bounds_slow_open.py TRACKING_DIR
"""

from __future__ import annotations

import json
import os
import sys
import time

from fault_prelude import report

import tracking_core

run = tracking_core.start_run(backends=["faulty", "steady"], tracking_dir=sys.argv[1])
actor = tracking_core.attach(role="actor", writer=True, collect=False)
for step in range(5):
    actor.log_metrics({"loss": step / 10}, step=step)
t0 = time.monotonic()
flushed = actor.flush(timeout=60)
seen = [json.loads(line) for line in open(os.environ["FAULT_OUT"])]
report(flushed=flushed, took=time.monotonic() - t0,
       delivered=sorted((c["b"], c["step"]) for c in seen if c["ev"] == "metric"))
run.finish(timeout=20)
