"""A run whose probe backend fails once, logging with a format of this process's own
(tests/core/test_delivery_process.py,
test_warnings_of_the_delivery_process_go_through_the_training_process_logging): prints the
probe's failures.

Usage: PROBE_FAIL_ONCE=1 python delivery_process_warnings.py TRACKING_DIR
"""

from __future__ import annotations

import logging
import sys

import tracking_core

logging.basicConfig(format="TRAINING-LOG %(name)s: %(message)s")
run = tracking_core.start_run(backends=["probe"], tracking_dir=sys.argv[1])
for step in range(20):
    run.log_metrics({"x": float(step)}, step=step)
summary = run.finish()
print(summary.backends["probe"]["failures"])
