"""Tables, histograms, texts and artifacts of a primary and a critic, with secrets planted in them
(tests/faults/test_rich_records.py: the every-kind and outage-then-sync tests). Logged
checkpoints are replaced and deleted right after ``log_artifact`` returns, a logged directory's
files rewritten and removed; prints the finish summaries, the checkpoints' sha256 and how long
each ``log_artifact`` call took.

Usage: python rich_records_every_kind.py TRACKING_DIR HF_TOKEN SK_TOKEN URL_WITH_PASSWORD
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import sys
import time
from typing import Any

import numpy as np
from fault_prelude import report, summ

import tracking_core

td, HF, SK, URL = sys.argv[1:5]
run = tracking_core.start_run(backends=["faulty", "steady"], tracking_dir=td)
critic = tracking_core.attach(role="critic", writer=True, collect=False)


def blob(path: str, size: int, seed: int) -> str:
    data = np.random.default_rng(seed).bytes(size)
    with open(path, "wb") as fh:
        fh.write(data)
    return hashlib.sha256(data).hexdigest()


want: dict[str, str] = {}
calls: list[float] = []
for step in range(3):
    rows: list[dict[str, Any]] = [
        {"prompt": f"q{step}-{i} {HF}", "response": "a" * 100 + f" {URL}", "reward": i / 4,
         "ok": i % 2 == 0, "missing": None, "nan": math.nan, "np": np.float32(0.5)}
        for i in range(4)
    ]
    run.log_table("rollout/samples", rows, step=step, step_key="rollout/step")
    rows[0]["prompt"] = "changed after logging"  # the copy taken at the call is delivered
    values = np.arange(100, dtype=float) + step
    run.log_histogram("rollout/reward", values, step=step, step_key="rollout/step", bins=10)
    values[:] = -1  # likewise
    critic.log_text("notes", f"step {step}: token {SK}", step=step)

    # A checkpoint, replaced and then deleted right after log_artifact returns (rotation).
    path = f"ckpt-{step}.bin"
    want[f"ckpt-{step}.bin"] = blob(path, 300_000 + step, step)
    t0 = time.perf_counter()
    critic.log_artifact(path, kind="checkpoint")
    calls.append(time.perf_counter() - t0)
    blob("other.bin", 10, 99)
    os.replace("other.bin", path)
    os.remove(path)

# A directory, whose files are rewritten (replaced) and removed right after.
os.makedirs("samples/sub", exist_ok=True)
dir_files = {"a.txt": b"alpha", "sub/b.txt": b"beta" * 1000}
for rel, data in dir_files.items():
    with open(os.path.join("samples", rel), "wb") as fh:
        fh.write(data)
run.log_artifact("samples", name="samples-dump", kind="dataset")
for rel in dir_files:
    with open("tmp", "wb") as fh:
        fh.write(b"replaced")
    os.replace("tmp", os.path.join("samples", rel))
shutil.rmtree("samples")

critic_summary = critic.finish(timeout=20)
primary_summary = run.finish(timeout=20)
report(critic=summ(critic_summary), primary=summ(primary_summary), want=want,
       dir_files={k: v.decode() for k, v in dir_files.items()}, calls=calls)
