"""The driver of a job of three processes logging to trackio (tests/backends/test_trackio.py):
starts the job file ``$TEST_CHILD`` for roles actor and critic, logs ``$TEST_STEPS`` steps of
its own, finishes with status ``$TEST_STATUS`` and prints the run id, the children's exit codes,
its trackio handle entry and its failures as JSON. The configs come as JSON in
``$TEST_CONFIGS``, the tracking directory in ``$TEST_TDIR``.

Usage: python trackio_driver.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import tracking_core

cfg = json.loads(os.environ["TEST_CONFIGS"])
run = tracking_core.start_run(
    cfg["launch"],
    backends=["trackio"],
    tracking_dir=os.environ["TEST_TDIR"],
    options={"trackio_project": "tc-test", "trackio_group": "ppo"},
)
children = [
    subprocess.Popen([sys.executable, os.environ["TEST_CHILD"], role])
    for role in ("actor", "critic")
]
for step in range(int(os.environ["TEST_STEPS"])):
    run.log_metrics(
        {"perf/step_time": 2.0 + step, "perf/nan": float("nan")}, step=step, step_key="perf/step"
    )
codes = [c.wait(timeout=120) for c in children]
summary = run.finish(status=os.environ["TEST_STATUS"])
print(
    json.dumps(
        {
            "run_id": run.run_id,
            "codes": codes,
            "entry": run.handle.backends["trackio"],
            "failures": summary.backends["trackio"]["failures"],
        }
    )
)
