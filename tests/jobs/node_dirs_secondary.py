"""A critic writer that logs one step and prints, as JSON, its tracking directory and journal
(tests/core/test_node_dirs.py).

Usage: python node_dirs_secondary.py
"""

from __future__ import annotations

import json

import tracking_core

run = tracking_core.attach(role="critic", writer=True, collect=False)
assert isinstance(run, tracking_core.Run)  # a writer
run.log_metrics({"loss": 1.0}, step=0)
print(json.dumps({"tracking_dir": str(run.tracking_dir), "journal": str(run.journal)}))
run.finish(timeout=5)
