"""A launcher that tears a worker down the way Ray does costs no value already journaled.

When a Ray worker exits (its job ended, its actor killed), Ray SIGKILLs the worker's direct
children and its process group; other launchers kill the whole process tree. Here the training
process does both to itself, with its delivery process still behind (a slow tracker): the
delivery process, in neither, delivers the rest, journals the end, applies the completion rule
and exits by itself. The same
scenario under a real two-node Ray cluster is tests/multinode/test_ray_nodes.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.faults.conftest import Faults, journal_files, missing_and_extra, once, only

STEPS = 300

TORN_DOWN_JOB = """
import signal, sys, tracking_core
run = tracking_core.start_run(backends=["faulty", "steady"], tracking_dir=sys.argv[1])
for step in range(300):
    run.log_metrics({"x": float(step)}, step=step)
_time.sleep(1.0)  # more than one flush interval: every value is in the journal
pid = delivery_pid(run)
out = _os.environ["FAULT_OUT"]
delivered = sum('"metric"' in line for line in open(out)) if _os.path.exists(out) else 0
print(f"DELIVERY {pid} DELIVERED {delivered}", flush=True)
# What Ray does when a worker exits (SIGKILL to its direct children, then to its process group),
# and more: every descendant, as launchers that walk the process tree do.
def children(pid):
    found = []
    for entry in _os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found
tree, todo = [], children(_os.getpid())
while todo:
    pid = todo.pop()
    tree.append(pid)
    todo.extend(children(pid))
for pid in tree:
    _os.kill(pid, signal.SIGKILL)
_os.killpg(_os.getpgid(0), signal.SIGKILL)
"""


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


@pytest.mark.slow
def test_a_worker_torn_down_as_ray_does_loses_nothing_journaled(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    env = faults.env(FAULT_SLOW="0.5", FAULT_MAX_BATCH="50", TRACKING_CORE_EXIT_TIMEOUT="30")
    job = jobs(TORN_DOWN_JOB, env, args=[td]).wait(60, check=False)
    assert job.returncode == -9, job.explain("the job was not torn down")
    words = job.stdout.split("DELIVERY ")[1].split()
    delivery, before = int(words[0]), int(words[2])
    assert before < 2 * STEPS, "delivery was not behind when the job was torn down: nothing tested"

    want = once(["x"], range(STEPS))
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and not (_gone(delivery) and journal_files(td) == []):
        time.sleep(0.2)
    for backend in ("faulty", "steady"):
        got = only(faults.metrics(backend), ["x"])
        assert got == want, (backend, missing_and_extra(got, want))
        assert [c["status"] for c in faults.events("close", backend)] == ["KILLED"]
    assert _gone(delivery), "the delivery process is still running"
    assert journal_files(td) == []
