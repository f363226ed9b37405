"""Runs a command with this process as the subreaper of everything it starts
(tests/faults/test_delivery_output.py: stopped then continued after training exited): the
keepers its job leaves behind are reaped here, each with its delivery process's exit code. The
job ends, every delivery process it stopped (its ``DELIVERY pid`` lines) is continued, and the
codes are printed as a ``CODES {pid: code}`` line; ``NO-SUBREAPER`` where prctl refuses.

Usage: python delivery_output_harness.py COMMAND [ARG ...]
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    print("NO-SUBREAPER", flush=True)
    sys.exit(0)
job = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, text=True)
assert job.stdout is not None
pids = []
for line in job.stdout:
    sys.stdout.write(line)
    if line.startswith("DELIVERY "):
        pids.append(int(line.split()[1]))
job.wait()
time.sleep(0.5)
for pid in pids:
    os.kill(pid, signal.SIGCONT)
codes: dict[int, int] = {}
deadline = time.monotonic() + 60
while len(codes) < len(pids) and time.monotonic() < deadline:
    try:
        pid, status = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if pid == 0:
        time.sleep(0.05)
    else:
        codes[pid] = os.waitstatus_to_exitcode(status)
print("CODES " + json.dumps(codes), flush=True)
for pid in pids:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
