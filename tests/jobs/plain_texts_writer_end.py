"""A run that fails after an actor writer finished its part (tests/core/test_plain_texts.py,
test_a_writers_end_line_never_says_the_run_finished): prints the actor's label.

Usage: python plain_texts_writer_end.py TRACKING_DIR
"""

from __future__ import annotations

import logging
import sys

import tracking_core

logging.basicConfig(level=logging.INFO, format="%(message)s")
run = tracking_core.start_run(backends=["jsonl"], tracking_dir=sys.argv[1])
actor = tracking_core.attach(role="actor", writer=True, collect=False)
assert isinstance(actor, tracking_core.Run)  # a writer
actor.log_metrics({"x": 1.0}, step=0)
actor.finish()
print(actor.label)
run.finish(status="FAILED")
