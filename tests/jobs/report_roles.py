"""A driver with an actor and a critic in its process, logging to the MLflow server at URI
(tests/core/test_report.py, test_nothing_but_where_and_why_comes_before_the_incomplete_block).
With a GATE (a file path; "-" for none), the job flushes, says so, and logs again only once the
gate file exists.

Usage: python report_roles.py TRACKING_DIR URI GATE
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable

import tracking_core

td, uri, gate = sys.argv[1], sys.argv[2], sys.argv[3]
run = tracking_core.start_run(backends=["mlflow"], tracking_dir=td, options={"mlflow_tracking_uri": uri})
actor = tracking_core.attach(role="actor", writer=True, collect=False)
critic = tracking_core.attach(role="critic", writer=True, collect=False)


def log(steps: Iterable[int]) -> None:
    for step in steps:
        run.log_metrics({"reward": float(step)}, step=step)
        actor.log_metrics({"pg_loss": 0.5}, step=step)
        critic.log_metrics({"value_loss": 0.25}, step=step)


log(range(5))
if gate != "-":
    print("flushed", [w.flush(timeout=60) for w in (run, actor, critic)], flush=True)
    while not os.path.exists(gate):
        time.sleep(0.1)
    log(range(5, 10))
actor.finish(timeout=3)
critic.finish(timeout=3)
run.finish(timeout=6)
