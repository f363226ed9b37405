"""A process that starts the run and attaches a role (each asks for the interval), logs and
finishes (tests/core/test_system_metrics.py,
test_an_interval_past_the_most_is_clamped_and_a_hostile_one_is_off_with_one_warning): prints
DONE and, as JSON, its sampler's interval and the finish summary.

Usage: TRACKING_CORE_SYSTEM_METRICS=... python system_metrics_two_calls.py
"""

from __future__ import annotations

import json
import logging

logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
import tracking_core  # noqa: E402 - after logging is configured
from tracking_core import system_metrics  # noqa: E402

run = tracking_core.start_run(backends="jsonl", name="interval")
critic = tracking_core.attach(role="critic", writer=True, collect=False)
sampler = system_metrics.sampler_for(run.handle.run_id)
for step in range(3):
    critic.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
critic.finish(timeout=20)
summary = run.finish(timeout=20)
print("DONE", json.dumps({"interval": sampler.interval if sampler else None, "summary": summary.describe()}), flush=True)
