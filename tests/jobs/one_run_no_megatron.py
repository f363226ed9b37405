"""A run and an actor with torch.distributed imported (tests/distributed/test_one_run.py,
test_megatron_is_not_imported_by_tracking_core): prints the megatron modules imported.

Usage: python one_run_no_megatron.py TRACKING_DIR
"""

from __future__ import annotations

import sys

import torch.distributed  # noqa: F401 - a training process has it

import tracking_core

run = tracking_core.start_run(backends=["jsonl"], tracking_dir=sys.argv[1])
child = tracking_core.attach(role="actor")
child.log_metrics({"x": 1.0}, step=0)
child.finish()
run.finish()
print(sorted(m for m in sys.modules if m.startswith("megatron")))
