"""Hostile names to SwanLab (offline) and trackio (tests/faults/test_names.py: hostile names stay
in SwanLab and trackio directories). Prints the run id, the finish summaries and both backends'
entries of the run handle. Runs in a working directory holding ``art.txt``.

Usage: python names_swan.py TRACKING_DIR NAMES_JSON ODD_JSON
(ODD_JSON: {"role", "run_id", "run_name", ...})
"""

from __future__ import annotations

import json
import sys

from fault_prelude import report, summ

import tracking_core

td, names, odd = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
run = tracking_core.start_run(
    config={"lr": 0.1}, backends=["swanlab", "trackio"], tracking_dir=td,
    run_id=odd["run_id"], name=odd["run_name"], options={"swanlab_mode": "offline"},
)
role = tracking_core.attach(role=odd["role"], writer=True, collect=False, config={"k": 1})
for i, name in enumerate(names):
    role.log_metrics({name: float(i)}, step=i)
    role.log_table(name, [{"n": i}], step=i)
    role.log_text(name, f"text {i}", step=i)
    role.log_artifact("art.txt", name=name)
summaries = [w.finish(timeout=120) for w in (role, run)]
report(run_id=run.run_id, summaries=[summ(s) for s in summaries],
       swanlab=run.handle.backends["swanlab"], trackio=run.handle.backends["trackio"])
