"""Logs 300 steps, prints ``DELIVERY <pid> DELIVERED <metric calls so far>``, then tears itself
down as Ray does: SIGKILL to every descendant, then to its process group
(tests/faults/test_launcher_teardown.py).

Usage: python launcher_teardown.py TRACKING_DIR
"""

from __future__ import annotations

import os
import signal
import sys
import time

from fault_prelude import delivery_pid

import tracking_core

run = tracking_core.start_run(backends=["faulty", "steady"], tracking_dir=sys.argv[1])
for step in range(300):
    run.log_metrics({"x": float(step)}, step=step)
time.sleep(1.0)  # more than one flush interval: every value is in the journal
pid = delivery_pid(run)
out = os.environ["FAULT_OUT"]
delivered = sum('"metric"' in line for line in open(out)) if os.path.exists(out) else 0
print(f"DELIVERY {pid} DELIVERED {delivered}", flush=True)


# What Ray does when a worker exits (SIGKILL to its direct children, then to its process group),
# and more: every descendant, as launchers that walk the process tree do.
def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


tree: list[int] = []
todo = children(os.getpid())
while todo:
    pid = todo.pop()
    tree.append(pid)
    todo.extend(children(pid))
for pid in tree:
    os.kill(pid, signal.SIGKILL)
os.killpg(os.getpgid(0), signal.SIGKILL)
