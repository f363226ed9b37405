"""A ``critic`` writer with a config of its own logs 30 steps and finishes within 5 seconds,
then the primary (tests/faults/test_completion.py,
test_a_config_that_always_fails_is_reported_kept_and_synced_without_holding_up_metrics): how long
the critic's finish took and both finish summaries.

Usage: python completion_config.py TRACKING_DIR
"""

from __future__ import annotations

import sys
import time

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(
    backends=["faulty", "steady"], tracking_dir=sys.argv[1], config={"lr": 0.1}
)
critic = tracking_core.attach(role="critic", writer=True, collect=False, config={"lr": 1e-5})
for step in range(30):
    critic.log_metrics({"value_loss": step / 10}, step=step)
t0 = time.monotonic()
critic_summary = critic.finish(timeout=5)
took = time.monotonic() - t0
primary_summary = run.finish(timeout=5)
report(took=took, critic=summ(critic_summary), primary=summ(primary_summary))
