"""An ``actor`` writer logs a table (``$SAMPLES``), a histogram (``$VALUES``) and a text holding
``$HF_SECRET`` to trackio; the run finishes FAILED (tests/backends/test_trackio.py,
test_tables_histograms_texts_and_a_failed_status): prints the run id and both writers' failures
as JSON.

Usage: python trackio_rich.py TRACKING_DIR
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import tracking_core

run = tracking_core.start_run(
    None, backends=["trackio"], tracking_dir=sys.argv[1], options={"trackio_project": "rich"}
)
actor = tracking_core.attach(run.handle, role="actor", writer=True, collect=False)
samples = json.loads(os.environ["SAMPLES"])
axis: dict[str, Any] = {"step": 3, "step_key": "rollout/step"}
actor.log_table("rollout/samples", samples, **axis)
actor.log_histogram("rollout/rewards", json.loads(os.environ["VALUES"]), bins=4, **axis)
actor.log_text("rollout/think", "<think>step by step</think> " + os.environ["HF_SECRET"], **axis)
a, p = actor.finish(), run.finish(status="FAILED")
assert a is not None  # a writer's summary
print(
    json.dumps(
        {
            "run_id": run.run_id,
            "failures": [a.backends["trackio"]["failures"], p.backends["trackio"]["failures"]],
        }
    )
)
