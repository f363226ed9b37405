"""A user's script with no logging configured (tests/core/test_report.py,
test_an_undelivered_run_ends_with_one_block_and_its_command_delivers_it): the primary and an
actor writer (a second delivery process, whose own report of the same failure reaches this
process) log to the MLflow server at URI, which is down.

Usage: python report_mlflow_down.py TRACKING_DIR URI
"""

from __future__ import annotations

import sys

import tracking_core

run = tracking_core.start_run(config={"lr": 0.1}, backends=["mlflow"], tracking_dir=sys.argv[1],
                              options={"mlflow_tracking_uri": sys.argv[2]})
actor = tracking_core.attach(role="actor", writer=True, collect=False, config={"lr": 0.2})
for step in range(5):
    run.log_metrics({"loss": 1.0 / (step + 1), "reward": float(step)}, step=step)
    actor.log_metrics({"pg_loss": 0.5}, step=step)
print("flushed", actor.flush(timeout=60), run.flush(timeout=60), flush=True)  # tried: it failed
actor.finish(timeout=3)
run.finish(timeout=6)
print("script done", flush=True)
