"""A run whose delivery process dies at once, its interpreter path broken
(tests/core/test_delivery_process.py,
test_a_delivery_process_that_cannot_start_falls_back_to_threads): prints this process's pid.

Usage: python delivery_process_no_interpreter.py TRACKING_DIR
"""

from __future__ import annotations

import os
import sys

import tracking_core

sys.executable = "/bin/false"  # a broken interpreter path: the child dies at once
run = tracking_core.start_run(backends=["probe"], tracking_dir=sys.argv[1])
run.log_metrics({"x": 1.0}, step=0)
run.finish()
print(os.getpid())
