"""A run on the MLflow server at URI that logs STEPS steps, SLEEP seconds apart, saying "open"
and every tenth step (tests/core/test_never_lose_mlflow.py). How it ends, by END: ``none`` (the
exit finishes the run), ``wait`` (waits until the file GATE exists, then finishes within 120 s),
``describe`` (finishes within 5 s and prints the summary) or ``raise`` (an uncaught
RuntimeError).

Usage: python never_lose_mlflow_job.py TRACKING_DIR URI GATE STEPS SLEEP END
"""

from __future__ import annotations

import os
import sys
import time

import tracking_core

steps, sleep, end = int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
run = tracking_core.start_run(backends=["mlflow"], tracking_dir=sys.argv[1],
                              options={"mlflow_tracking_uri": sys.argv[2]})
print("open", flush=True)
for step in range(steps):
    run.log_metrics({"loss": step / 10, "reward": float(step)}, step=step, step_key="train/step")
    if step % 10 == 0:
        print("step", step, flush=True)
    time.sleep(sleep)
if end == "wait":
    while not os.path.exists(sys.argv[3]):
        time.sleep(0.05)
    run.finish(timeout=120)
elif end == "describe":
    print(run.finish(timeout=5).describe())
elif end == "raise":
    raise RuntimeError("diverged")
