"""A ``critic`` writer with a config of its own logs three steps; it and the primary finish within
5 seconds (tests/faults/test_summary_counts.py,
test_a_config_section_the_summary_says_is_owed_is_what_sync_says_it_delivered): both finish
summaries.

Usage: python summary_counts_config.py TRACKING_DIR
"""

from __future__ import annotations

import sys

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(
    config={"lr": 0.1}, backends=["faulty", "steady"], tracking_dir=sys.argv[1]
)
critic = tracking_core.attach(role="critic", writer=True, collect=False, config={"lr": 1e-5})
for step in range(3):
    critic.log_metrics({"value_loss": step / 10}, step=step)
report(critic=summ(critic.finish(timeout=5)), primary=summ(run.finish(timeout=5)))
