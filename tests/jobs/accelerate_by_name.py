"""Accelerate with ``log_with="tracking_core"`` after ``import tracking_core``, imported before
or after Accelerate (FIRST: ``tracking_core`` or ``accelerate``), its tracker run named RUN_NAME
(tests/hosts/test_accelerate.py, test_log_with_the_name_after_import_tracking_core): prints, as
JSON, the MLflow run id and whether the finish drained.

Usage: python accelerate_by_name.py FIRST RUN_NAME
"""

from __future__ import annotations

import json
import sys

first, run_name = sys.argv[1], sys.argv[2]
if first == "tracking_core":  # the order of the imports is what is tested
    import tracking_core  # noqa: F401, I001 - registers the name with Accelerate
    from accelerate import Accelerator
else:
    from accelerate import Accelerator

    import tracking_core  # noqa: F401 - registers the name with Accelerate
accelerator = Accelerator(cpu=True, log_with="tracking_core")
accelerator.init_trackers(
    "acc-by-name", config={"learning_rate": 0.05},
    init_kwargs={"tracking_core": {"run_name": run_name}},
)
for step in range(3):
    accelerator.log({"train/loss": 1.0 / (step + 1)}, step=step)
tracker = accelerator.get_tracker("tracking_core", unwrap=False)
accelerator.end_training()
run = tracker.tracker
print(json.dumps({"mlflow_run": run.handle.backends["mlflow"]["run_id"], "drained": run.finished.drained}))
