"""Accelerate with ``log_with="tracking_core"`` in a process that never imports tracking-core
(tests/hosts/test_accelerate.py,
test_without_importing_tracking_core_accelerate_does_not_know_the_name): prints Accelerate's
error.

Usage: python accelerate_unknown_name.py
"""

from __future__ import annotations

import sys

from accelerate import Accelerator

try:
    Accelerator(cpu=True, log_with="tracking_core")
except ValueError as exc:
    print(exc)
assert "tracking_core" not in sys.modules
