"""Clashing metric keys and hostile artifact, table and text names to a real MLflow server, then
a second writer in another process (names_mlflow_late.py) logging the same keys
(tests/faults/test_names.py: MLflow renames never collide and dotted names arrive). Prints the
run id, the finish summary and the second writer's stdout and stderr. Runs in a working
directory holding ``art.txt``.

Usage: python names_mlflow.py MLFLOW_TRACKING_URI NAMES_JSON KEYS_JSON
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from fault_prelude import report, summ

import tracking_core

uri, names, keys = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
run = tracking_core.start_run(backends=["mlflow"], tracking_dir="tr", options={"mlflow_tracking_uri": uri})
for step in range(5):
    run.log_metrics({k: i * 100 + step for i, k in enumerate(keys)}, step=step)
for i, name in enumerate(names):
    run.log_artifact("art.txt", name=name)
    run.log_table(name, [{"n": i}], step=0)
    run.log_text(name, f"text {i}", step=0)
run.flush(timeout=60)
# A second writer, in another process, logs the same keys (unprefixed): the same series.
late = os.path.join(os.path.dirname(os.path.abspath(__file__)), "names_mlflow_late.py")
child = subprocess.run([sys.executable, late, json.dumps(keys)], capture_output=True, text=True)
summary = run.finish(timeout=60)
report(run_id=run.run_id, summary=summ(summary), child=child.stdout.strip(), child_err=child.stderr[-3000:])
