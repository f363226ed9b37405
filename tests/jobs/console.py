"""A primary and an ``actor`` writer logging 200 steps to the console backend while nobody reads
this process's stderr (tests/backends/test_console.py, test_a_job_whose_stderr_nobody_reads):
writes the slowest log_metrics call, how long both finishes took, whether each drained and the
console's failures to OUT_JSON.

Usage: python console.py TRACKING_DIR process|thread OUT_JSON
"""

from __future__ import annotations

import json
import logging
import sys
import time
import warnings

# Nothing else of this process may write to its (full) stderr: the console alone is under test.
logging.getLogger().addHandler(logging.NullHandler())
warnings.simplefilter("ignore")
import tracking_core  # noqa: E402

run = tracking_core.start_run(
    {"lr": 1.0},
    backends=["console"],
    tracking_dir=sys.argv[1],
    options={"console_interval": 0.1},
    delivery=sys.argv[2],
)
actor = tracking_core.attach(
    run.handle, role="actor", writer=True, collect=False, config={"lr": 2.0}, delivery=sys.argv[2]
)
worst = 0.0
for step in range(200):
    t0 = time.perf_counter()
    actor.log_metrics({"train/loss": 1.0 / (step + 1)}, step=step, step_key="train/step")
    worst = max(worst, time.perf_counter() - t0)
    time.sleep(0.005)
t0 = time.monotonic()
a = actor.finish(timeout=10)
p = run.finish(timeout=10)
assert a is not None and p is not None
print(
    json.dumps(
        {
            "worst": worst,
            "finish": time.monotonic() - t0,
            "drained": [a.drained, p.drained],
            "failures": [a.backends["console"]["failures"], p.backends["console"]["failures"]],
        }
    ),
    file=open(sys.argv[3], "w"),
)
