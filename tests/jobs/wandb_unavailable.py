"""Selects the wandb backend where wandb cannot be imported (tests/backends/test_wandb.py,
test_missing_wandb_names_the_extra): prints ``ERROR: <the error>``, or ``no error``.

Usage: python wandb_unavailable.py TRACKING_DIR
"""

from __future__ import annotations

import sys

import tracking_core

try:
    tracking_core.start_run({"lr": 1}, backends=["wandb"], tracking_dir=sys.argv[1])
except tracking_core.BackendUnavailable as exc:
    print("ERROR:", exc)
else:
    print("no error")
