"""A critic writer attaching to the job's run (its handle in $TRACKING_CORE_RUN, else found from
the job id) on a node of its own (tests/core/test_node_dirs.py): logs 3 steps, finishes within
TIMEOUT seconds and prints REPORT with its host, tracking directory, journal and whether it
drained.

Usage: python node_dirs_writer.py TIMEOUT
"""

from __future__ import annotations

import json
import logging
import socket
import sys

import tracking_core

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
run = tracking_core.attach(role="critic", config={"critic_lr": 0.25}, writer=True)
assert isinstance(run, tracking_core.Run)  # a writer
for step in range(3):
    run.log_metrics({"loss": 1.0 + step}, step=step, step_key="train/step")
journal = str(run.journal)
summary = run.finish(timeout=float(sys.argv[1]))
print("REPORT " + json.dumps({"host": socket.gethostname(), "tracking_dir": str(run.tracking_dir),
                             "journal": journal, "drained": summary.drained}), flush=True)
