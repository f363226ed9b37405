"""Selects the mlflow backend where mlflow cannot be imported (tests/backends/test_mlflow.py,
test_selecting_mlflow_without_mlflow_names_the_extra): prints the BackendUnavailable error; exits
with a message if mlflow is importable or selecting it did not fail.

Usage: python mlflow_unavailable.py TRACKING_DIR
"""

from __future__ import annotations

import sys

import tracking_core

try:
    import mlflow  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("mlflow is still importable")
try:
    tracking_core.start_run(backends=["mlflow"], tracking_dir=sys.argv[1])
except tracking_core.BackendUnavailable as exc:
    print(exc)
else:
    raise SystemExit("selecting mlflow did not fail")
