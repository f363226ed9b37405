"""Checkpoints logged and deleted at once (rotation), then a flush and a wait of up to 10 s for
the journal's snapshots to go (tests/faults/test_rich_records.py: delivered snapshots are deleted
while the run goes on). Prints whether the flush drained and the snapshot files left.

Usage: python rich_records_rotation.py TRACKING_DIR
"""

from __future__ import annotations

import os
import sys
import time

from fault_prelude import report

import tracking_core

td = sys.argv[1]
run = tracking_core.start_run(backends=["steady"], tracking_dir=td)
for i in range(6):
    path = f"ckpt-{i}.bin"
    with open(path, "wb") as fh:
        fh.write(os.urandom(200_000))
    run.log_artifact(path, kind="checkpoint")
    os.remove(path)  # rotated away: only the snapshot holds its bytes now
flushed = run.flush(20)
deadline = time.monotonic() + 10
left: list[str] | None = None
while time.monotonic() < deadline:
    left = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(td, "journal")) if "artifacts" in d for f in fs]
    if not left:
        break
    time.sleep(0.2)
report(flushed=flushed, left=left)
run.finish(timeout=20)
