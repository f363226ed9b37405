"""A process whose threads call the job's c10d store exits cleanly whatever they are doing.

A daemon thread still inside a store call when the interpreter finalises aborts the process
("terminate called without an active exception"): a training job that ended well would fail at
its exit. The package's store threads (the attendance roll and its watcher, the reducer's
gatherer) stop and are waited for before the interpreter finalises.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.subprocess_python import JOBS
from tests.helpers.torchrun import job_env, torchrun

WORKER = JOBS / "exit_worker.py"


def _world(tmp_path: Path, plain: bool) -> tuple[subprocess.CompletedProcess[str], list[dict[str, bool]], float]:
    reports = tmp_path / ("plain" if plain else "package")
    reports.mkdir()
    env = job_env(tmp_path, REPORT_DIR=str(reports), PLAIN="1" if plain else "0", TRACKING_CORE_BACKENDS="jsonl")
    done = torchrun(WORKER, 2, tmp_path, env, timeout=180)
    ended = time.monotonic()
    exits = [float(line.split()[-1]) for line in done.stdout.splitlines() if line.startswith("exiting")]
    reported = [json.loads((reports / f"{r}.json").read_text()) for r in range(2) if (reports / f"{r}.json").exists()]
    return done, reported, ended - max(exits, default=ended)


@pytest.mark.slow
def test_store_threads_never_abort_the_exit(tmp_path: Path) -> None:
    done, reported, exit_seconds = _world(tmp_path, plain=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "terminate called" not in output
    # every thread of the package that calls the store was started through store_thread: rank 1
    # watches for its role's writer, both ranks reduce
    assert reported[0] == {"test-store-calls": True, "tracking-core-reduce": True}
    assert reported[1] == {"test-store-calls": True, "tracking-core-reduce": True, "tracking-core-attendance": True}
    # the watcher (up to 60 s) holds the exit no longer than its poll: torchrun's own teardown aside
    assert exit_seconds < 20, exit_seconds


@pytest.mark.slow
def test_a_plain_daemon_thread_in_a_store_call_aborts_the_exit(tmp_path: Path) -> None:
    """The fault the mechanism exists for: the same world with a plain daemon thread aborts."""
    done, _reported, _seconds = _world(tmp_path, plain=True)
    assert done.returncode != 0
    assert "terminate called without an active exception" in done.stdout + done.stderr
