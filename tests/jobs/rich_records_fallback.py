"""Every rich kind logged to the backends of rich_records_bare.py, which lack their hooks
(tests/faults/test_rich_records.py: a backend without the hooks gets the documented fallbacks).

Usage: python rich_records_fallback.py TRACKING_DIR
"""

from __future__ import annotations

import sys

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["texty", "scalars"], tracking_dir=sys.argv[1])
with open("ckpt.bin", "wb") as fh:
    fh.write(b"weights")
for step in range(2):
    run.log_table("samples", [{"prompt": "a|b", "reward": 1.5}], step=step)
    run.log_histogram("reward", [1.0, 2.0, 3.0, 4.0], step=step)
    run.log_text("note", "hello", step=step)
run.log_artifact("ckpt.bin", kind="model")
summary = run.finish(timeout=20)
report(summary=summ(summary))
