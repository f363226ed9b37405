"""One process of a job (tests/core/test_system_metrics.py): the primary (MODE=primary) or a
process attaching with the handle in $TRACKING_CORE_RUN (as $ROLE, a writer if $WRITER is 1). With
$OPTION, that is its --tracking-system-metrics. It logs a training metric every 20 ms for $SECONDS
(1.5), holds on until the file $HOLD exists (if set), finishes (the primary) or just exits, and
says what its sampler did (lines HANDLE, SAMPLER and DONE).

Usage: MODE=primary BACKENDS=jsonl python system_metrics_worker.py
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
import tracking_core  # noqa: E402 - after logging is configured
from tracking_core import system_metrics  # noqa: E402

if TYPE_CHECKING:
    from tracking_core import NullRun, Run

run: Run | NullRun

args: Any = None
if "OPTION" in os.environ:
    import argparse

    args = argparse.Namespace(tracking_system_metrics=os.environ["OPTION"])
if os.environ["MODE"] == "primary":
    run = tracking_core.start_run(args=args, backends=os.environ["BACKENDS"], name="system")
    print("HANDLE " + run.handle.to_json(), flush=True)
else:
    run = tracking_core.attach(role=os.environ["ROLE"], args=args, writer=os.environ["WRITER"] == "1")
assert run.handle is not None  # on a run
run_id = run.handle.run_id
sampler = system_metrics.sampler_for(run_id)
print("SAMPLER", json.dumps({"sampling": bool(sampler and sampler.sampling), "pid": os.getpid()}), flush=True)
steps, gaps = 0, []
until = time.monotonic() + float(os.environ.get("SECONDS", "1.5"))
while time.monotonic() < until:
    begin = time.perf_counter()
    run.log_metrics({"train/loss": 1.0 / (steps + 1)}, step=steps, step_key="train/step")
    steps += 1
    time.sleep(0.02)
    gaps.append(time.perf_counter() - begin)
hold = os.environ.get("HOLD")
while hold and not os.path.exists(hold):
    time.sleep(0.05)
summary = None
if os.environ["MODE"] == "primary":
    began = time.monotonic()
    finished = run.finish(timeout=30)
    assert finished is not None  # the primary's summary
    summary = f"{finished.describe()} ({time.monotonic() - began:.1f} s)"
after = sorted(t.name for t in threading.enumerate() if t.name.startswith("tracking-core-system"))
sampler = system_metrics.sampler_for(run_id) or sampler
print("DONE", json.dumps({
    "steps": steps, "longest_step_s": max(gaps, default=0.0),
    "sampling": bool(sampler and sampler.sampling), "samples": sampler.samples if sampler else 0,
    "threads": sorted(t.name for t in threading.enumerate()),
    "sampler_thread_is_main": sampler is not None and sampler._thread is threading.main_thread(),
    "summary": summary, "threads_after_finish": after if os.environ["MODE"] == "primary" else None,
}), flush=True)
