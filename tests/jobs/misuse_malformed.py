"""Attaches with each argument as ``$TRACKING_CORE_RUN`` (tests/faults/test_misuse.py,
test_a_malformed_run_handle_is_an_error_that_says_so): per value, the error's type and message,
or None where attach accepted it.

Usage: python misuse_malformed.py HANDLE [HANDLE ...]
"""

from __future__ import annotations

import os
import sys

from fault_prelude import report

import tracking_core

results: list[dict[str, str] | None] = []
for value in sys.argv[1:]:
    os.environ["TRACKING_CORE_RUN"] = value
    try:
        tracking_core.attach(role="actor", writer=True, collect=False)
    except Exception as exc:
        results.append({"type": type(exc).__name__, "message": str(exc)})
    else:
        results.append(None)
report(results=results)
