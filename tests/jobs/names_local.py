"""Hostile names (roles, run id and name, namespace, metrics, tables, texts, artifacts) to jsonl,
W&B offline and TensorBoard (tests/faults/test_names.py: hostile names stay in the tracking
directory and arrive). Prints the run id, the writers' labels, the finish summaries and the
TensorBoard and W&B directories. Runs in a working directory holding ``art.txt``.

Usage: python names_local.py TRACKING_DIR NAMES_JSON ODD_JSON
(ODD_JSON: {"role", "text_role", "run_id", "run_name", "namespace"})
"""

from __future__ import annotations

import json
import sys

from fault_prelude import report, summ

import tracking_core

td, names, odd = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
run = tracking_core.start_run(
    config={"lr": 0.1}, backends=["jsonl", "wandb", "tensorboard"], tracking_dir=td,
    run_id=odd["run_id"], name=odd["run_name"], tags={"../t": "v"},
)
role = tracking_core.attach(role=odd["role"], writer=True, collect=False, config={"k": 1})
texts = tracking_core.attach(role=odd["text_role"], writer=True, collect=False)
assert isinstance(role, tracking_core.Run) and isinstance(texts, tracking_core.Run)  # writers
role.log_config({"ns": 1}, namespace=odd["namespace"])
for i, name in enumerate(names):
    role.log_metrics({name: float(i)}, step=i, step_key="../../step")
    role.log_artifact("art.txt", name=name)
    run.log_table(name, [{"n": i, "name": name}], step=i)
    texts.log_text(name, f"text {i}", step=i)
run.log_artifact("art.txt", name="../../primary-x")
summaries = [w.finish(timeout=120) for w in (texts, role, run)]
report(run_id=run.run_id, labels=[role.label, texts.label], summaries=[summ(s) for s in summaries],
       logdir=run.handle.backends["tensorboard"]["logdir"], wandb_dir=run.handle.backends["wandb"]["dir"])
