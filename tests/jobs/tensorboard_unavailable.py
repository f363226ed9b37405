"""Selects the tensorboard backend where tensorboardX cannot be imported
(tests/backends/test_tensorboard.py, test_missing_tensorboardx_names_the_extra): prints the
BackendUnavailable error; exits with a message if selecting it did not fail.

Usage: python tensorboard_unavailable.py TRACKING_DIR
"""

from __future__ import annotations

import sys

import tracking_core

try:
    tracking_core.start_run(backends=["tensorboard"], tracking_dir=sys.argv[1])
except tracking_core.BackendUnavailable as exc:
    print(exc)
else:
    raise SystemExit("selecting tensorboard without tensorboardX did not fail")
