"""The driver of a job of three processes logging to SwanLab offline
(tests/backends/test_swanlab.py, test_driver_and_two_role_writers_one_experiment): starts the
job file ``$TEST_CHILD`` for roles actor and critic, logs ``$TEST_STEPS`` steps of its own, and
prints the run id, the children's exit codes, its SwanLab handle entry and its failures as JSON.
The configs come as JSON in ``$TEST_CONFIGS``, the tracking directory in ``$TEST_TDIR``, the
API key option in ``$CLI_KEY``; the command line is a host's (an API key among it).

Usage: python swanlab_driver.py [HOST ARGS ...]
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
    backends=["swanlab"],
    tracking_dir=os.environ["TEST_TDIR"],
    options={
        "swanlab_project": "tc-test",
        "swanlab_mode": "offline",
        "swanlab_api_key": os.environ["CLI_KEY"],
    },
)
children = [
    subprocess.Popen([sys.executable, os.environ["TEST_CHILD"], role])
    for role in ("actor", "critic")
]
for step in range(int(os.environ["TEST_STEPS"])):
    run.log_metrics({"perf/step_time": 2.0 + step}, step=step, step_key="perf/step")
codes = [c.wait(timeout=120) for c in children]
summary = run.finish()
print(
    json.dumps(
        {
            "run_id": run.run_id,
            "codes": codes,
            "entry": run.handle.backends["swanlab"],
            "failures": summary.backends["swanlab"]["failures"],
        }
    )
)
