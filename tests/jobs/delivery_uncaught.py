"""A run whose training raises (tests/core/test_delivery.py,
test_uncaught_exception_marks_the_run_failed): prints the run id, then raises SystemError.

Usage: python delivery_uncaught.py TRACKING_DIR
"""

from __future__ import annotations

import sys

import tracking_core

run = tracking_core.start_run(backends=["jsonl"], tracking_dir=sys.argv[1])
print(run.run_id, flush=True)
raise SystemError("training blew up")
