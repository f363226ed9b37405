"""One run to jsonl, W&B, TensorBoard and MLflow with a planted token in every field a user or a
host fills (tests/faults/test_secrets_everywhere.py): the tokens come as JSON in ``$PLANTED``,
the command line's own tokens follow the three arguments. Prints ``FLUSHED <flushed>``, waits
for a line on stdin, finishes and reports the finish summary.

Usage: python secrets_everywhere.py TRACKING_DIR MLFLOW_URI ARTIFACT [ARG ...]
"""

from __future__ import annotations

import json
import os
import sys

from fault_prelude import report, summ

# isort: split
import numpy as np

import tracking_core

tokens = json.loads(os.environ["PLANTED"])
td, uri, src = sys.argv[1], sys.argv[2], sys.argv[3]
run = tracking_core.start_run(
    config={"lr": 0.1, "env": ["AWS_SECRET_ACCESS_KEY", tokens["config pair"]]},
    backends=["jsonl", "wandb", "tensorboard", "mlflow"],
    tracking_dir=td,
    name="run " + tokens["run name"],
    tags={"team": "rl", tokens["tag key"]: "x", "note": "see " + tokens["tag value"]},
    options={"mlflow_tracking_uri": uri},
)
metric = "https://user:" + tokens["metric name"] + "@host/x"
for step in range(3):
    run.log_metrics({metric: float(step), "loss": 1.0 / (step + 1)}, step=step)
    run.log_table(
        "samples " + tokens["table key"],
        [{"prompt": "p", "col " + tokens["column name"]: step}],
        step=step,
    )
    run.log_text("note " + tokens["text key"], "a note", step=step)
    run.log_histogram("h " + tokens["histogram key"], np.arange(10.0) + step, step=step, bins=4)
run.log_artifact(src, name="ckpt " + tokens["artifact name"])
flushed = run.flush(180)
print("FLUSHED", flushed, flush=True)
sys.stdin.readline()  # the test searches the files while the journal is there
summary = run.finish(180)
report(summary=summ(summary), flushed=flushed)
