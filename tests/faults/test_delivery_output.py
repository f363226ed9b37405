"""Where the delivery process's output goes, and how it ends when it outlives training.

* Its stdout and stderr are its own log file (``delivery-<label>.log`` in the run's folder), not
  the training process's: ``python train.py 2>&1 | tee log`` ends when training ends, even while
  the delivery process goes on (here: stopped with SIGSTOP). Its warnings still reach the
  training process's log.
* A delivery process stopped (SIGSTOP) while its training process finished and exited, then
  continued (SIGCONT), finds both the finish request and its parent gone: it finishes once,
  delivers the rest, exits 0 with no traceback in its log (it died of ``OSError: Bad file
  descriptor``, two finishes closing one lock). The race is hit by chance, so several delivery
  processes are stopped and continued at once, and their exit codes collected by a subreaper
  (from the keeper that waited for each: it exits as its delivery process did).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.faults.conftest import Faults, journal_files
from tests.helpers.subprocess_python import JOBS

PIPED_JOB = JOBS / "delivery_output_piped.py"


def _read_to_eof(stream, lines: list[str], done: threading.Event) -> None:
    for line in stream:
        lines.append(line)
    done.set()


@pytest.mark.slow
def test_a_pipe_from_training_closes_when_training_ends(faults: Faults, tmp_path: Path) -> None:
    td = tmp_path / "td"
    # train.py 2>&1 | cat: one pipe for both, read to its end.
    proc = subprocess.Popen(
        [sys.executable, str(PIPED_JOB), str(td)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=faults.env(FAULT_REJECT_KEY="refused"),
        start_new_session=True,
    )
    lines: list[str] = []
    eof = threading.Event()
    threading.Thread(target=_read_to_eof, args=(proc.stdout, lines, eof), daemon=True).start()
    delivery = None
    try:
        proc.wait(90)
        exited = time.monotonic()
        closed = eof.wait(10)
        took = time.monotonic() - exited
        text = "".join(lines)
        delivery = int(text.split("DELIVERY ")[1].split()[0])
        assert closed and took < 2.0, (
            f"the pipe stayed open {took:.1f} s after training ended:\n{text[-3000:]}"
        )
        assert proc.returncode == 0, text[-3000:]
        # The delivery process's warning (the refused key) reached the training process's log.
        assert any(
            "refused" in line and "faulty" in line for line in lines if line.startswith("WARNING")
        ), text[-3000:]
        result = json.loads(text.split("RESULT ")[1].splitlines()[0])
        log = td / "runs" / result["run_id"] / f"delivery-{result['label']}.log"
        assert log.exists(), sorted(p.name for p in (td / "runs" / result["run_id"]).iterdir())
    finally:
        if delivery is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(delivery, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


STOPPED_JOB = JOBS / "delivery_output_stopped.py"

#: Runs a command with this process as the subreaper of everything it starts: the keepers its
#: job leaves behind are reaped here, each with its delivery process's exit code. The job ends,
#: every delivery process it stopped is continued, and the codes are printed.
HARNESS = JOBS / "delivery_output_harness.py"

RACES = 6


@pytest.mark.slow
def test_stopped_then_continued_after_training_exited(faults: Faults, tmp_path: Path) -> None:
    td = tmp_path / "td"
    err = tmp_path / "harness.stderr"  # where the delivery processes' output went before
    with open(err, "w") as stderr:
        done = subprocess.run(
            [sys.executable, str(HARNESS), sys.executable, str(STOPPED_JOB), str(td), str(RACES)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=faults.env(),
            timeout=240,
        )
    if "NO-SUBREAPER" in done.stdout:
        pytest.skip("prctl(PR_SET_CHILD_SUBREAPER) is not available here")
    codes = json.loads(done.stdout.split("CODES ")[1].splitlines()[0])
    logs = {p.name: p.read_text() for p in td.glob("runs/*/delivery-*.log")}
    said = err.read_text() + "".join(logs.values())
    assert "Traceback" not in said, said[-4000:]
    assert list(codes.values()) == [0] * RACES, (codes, said[-4000:])
    # Each one delivered the rest (the close) and applied the completion rule.
    assert [c["status"] for c in faults.events("close", "steady")] == ["FINISHED"] * RACES
    assert journal_files(td) == []
    assert all(not text for text in logs.values()), logs
