"""A writer with a ``multiprocessing`` fork child that logs on the inherited run and a spawn
child that attaches as ``spawned`` (tests/faults/test_fork.py: a multiprocessing fork child is
told, a spawned child attaches). Prints both children's exit codes and the finish summary.

Usage: python fork_multiprocessing.py TRACKING_DIR
"""

from __future__ import annotations

import multiprocessing
import sys
import time

from fault_prelude import report, summ

import tracking_core


def forked_child() -> None:
    for step in range(10):
        run.log_metrics({"forkchild": float(step)}, step=step)
    time.sleep(0.3)


def spawned_child() -> None:
    import tracking_core

    worker = tracking_core.attach(role="spawned", writer=True, collect=False)
    for step in range(50):
        worker.log_metrics({"y": float(step)}, step=step)
    worker.finish(timeout=20)


if __name__ == "__main__":
    run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1])
    for step in range(100):
        run.log_metrics({"x": float(step)}, step=step)
    run.flush(20)
    forked = multiprocessing.get_context("fork").Process(target=forked_child)
    forked.start()
    forked.join(60)
    spawned = multiprocessing.get_context("spawn").Process(target=spawned_child)
    spawned.start()
    spawned.join(120)
    for step in range(100, 200):
        run.log_metrics({"x": float(step)}, step=step)
    summary = run.finish(timeout=20)
    report(forked=forked.exitcode, spawned=spawned.exitcode, summary=summ(summary))
