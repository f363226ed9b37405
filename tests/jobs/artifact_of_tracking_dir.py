"""Logs to jsonl in ``./tr`` and logs the working directory (which holds it) as an artifact,
twice (tests/faults/test_artifact_of_tracking_dir.py): the run id and the finish summary.

Usage: python artifact_of_tracking_dir.py  (run in the folder to log)
"""

from __future__ import annotations

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["jsonl"], tracking_dir="tr")
for step in range(100):
    run.log_metrics({"v": step}, step=step)
run.flush(timeout=30)
run.log_artifact(".", name="workdir")
run.log_artifact(".", name="workdir-again")
for step in range(100, 200):
    run.log_metrics({"v": step}, step=step)
summary = run.finish(timeout=60)
report(run_id=run.run_id, summary=summ(summary))
