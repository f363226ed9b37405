"""A writer that ``os.fork()``s after 100 values: the child logs 10 values on the run it
inherited and exits normally, the parent logs 100 more and finishes (tests/faults/test_fork.py:
an os.fork child never closes the parent's run). Prints the child's wait status and the finish
summary.

Usage: python fork_os.py TRACKING_DIR
"""

from __future__ import annotations

import os
import sys

from fault_prelude import report, summ

import tracking_core

run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1])
for step in range(100):
    run.log_metrics({"x": float(step)}, step=step)
run.flush(20)
pid = os.fork()
if pid == 0:
    # the child logs on the run it inherited, then exits normally: exit hooks run
    for step in range(10):
        run.log_metrics({"child": float(step)}, step=step)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
for step in range(100, 200):
    run.log_metrics({"x": float(step)}, step=step)
summary = run.finish(timeout=20)
report(child_status=status, summary=summ(summary))
