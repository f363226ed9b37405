"""An actor writer whose delivery process crashes while the probe holds a call: by a SIGABRT
sent to it (CRASH "signal") or by the fatal error the probe's own thread raises ($PROBE_FATAL)
(tests/core/test_delivery_process.py,
test_a_crash_outside_any_tracker_call_names_the_process_and_blames_no_tracker): prints the
actor's finish summary and its label.

Usage: PROBE_HOLD=FILE python delivery_process_crash.py TRACKING_DIR CRASH
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import tracking_core
from tracking_core.runs import Run

crash = sys.argv[2]
run = tracking_core.start_run(backends=["probe"], tracking_dir=sys.argv[1])
actor = tracking_core.attach(role="actor", writer=True, collect=False)
assert isinstance(actor, Run)  # a writer
for step in range(50):
    actor.log_metrics({"x": float(step)}, step=step)
deadline = time.monotonic() + 60
holding = None
while holding is None and time.monotonic() < deadline:
    if os.path.exists(os.environ["PROBE_OUT"]):
        for line in open(os.environ["PROBE_OUT"]):
            holding = json.loads(line).get("holding") or holding
    time.sleep(0.05)
if crash == "signal":
    assert holding is not None
    os.kill(holding, signal.SIGABRT)
for step in range(50, 100):
    actor.log_metrics({"x": float(step)}, step=step)
summary = actor.finish(timeout=30)
assert summary is not None
print(summary.describe())
print(actor.label)
run.finish()
