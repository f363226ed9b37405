"""The console backend: a rate-limited view on stderr that never makes anyone wait on it.

Real pipes, no stand-ins: the rate test reads the backend's output from a pipe; the blocked-stderr
tests give it a pipe whose buffer is already full and that nobody reads, the way a terminal or
log collector that stopped reading looks to a writer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tracking_console.backend import WRITE_BOUND, ConsoleBackend
from tracking_console.view import Board, fmt_value, run_started

import tracking_core
from tests.helpers.subprocess_python import JOBS, python_env
from tracking_core import MetricRecord, RunContext, RunStatus


def context(tmp: Path, interval: float, *, role: str | None = None) -> RunContext:
    return RunContext(
        backend="console", run_id="job-1", name="ppo", primary=role is None, role=role,
        tracking_dir=tmp, options={"console_interval": interval},
    )


def records(step: int, role: str = "actor") -> list[MetricRecord]:
    now = time.time()
    return [
        MetricRecord("train/loss", 1.0 / (step + 1), step, now, 2 * step, role, f"{role}/", "train/step"),
        MetricRecord("train/kl", 0.01 * step, step, now, 2 * step + 1, role, f"{role}/", "train/step"),
    ]


def full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is full: the next blocking write to ``w`` waits for a reader."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    return r, w


def test_view_lines() -> None:
    board = Board("job-1", started=0.0)
    board.update("actor", records(3))
    board.config("actor", "actor", 12)
    line = board.render(now=2.5)
    assert line == "[tracking-core] job-1 2.5s: actor | train/step=3 | train/kl=0.03 train/loss=0.25 | 2 values\n"
    summary = board.summary("actor", "FINISHED", primary=False, now=61.0)
    assert summary.splitlines()[0] == "[tracking-core] actor of run job-1 detached after 1m01s; configs: actor(12)"
    assert (fmt_value(1e-6), fmt_value(1200.0), fmt_value(float("nan"))) == ("1e-06", "1200", "nan")
    # Every writer counts from the run's start, which a tracking-core run id carries.
    started = time.mktime((2026, 1, 1, 0, 0, 0, 0, 0, -1))
    assert run_started("20260101-000000-abcdef", now=started + 90) == started
    assert run_started("job-1", now=123.0) == run_started("20990101-000000-x", now=123.0) == 123.0


def test_rate_limited_and_ends_with_the_summary(tmp_path: Path) -> None:
    r, w = os.pipe()
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(r, 65536), b"")))
    reader.start()
    interval = 0.3
    backend = ConsoleBackend(context(tmp_path, interval, role="actor"), fd=w)
    backend.attach_run(run=backend.context, attach={})
    start = time.monotonic()
    step = 0
    while time.monotonic() - start < 1.5:  # ~150 calls over five intervals
        backend.log_metrics(records(step))
        step += 1
        time.sleep(0.01)
    elapsed = time.monotonic() - start
    backend.close_run(status=RunStatus.FINISHED, run=backend.context)
    os.close(w)
    reader.join(5)
    os.close(r)
    lines = b"".join(chunks).decode().splitlines()
    views = [line for line in lines if line.startswith("[tracking-core] job-1 ")]
    assert step >= 30  # even on a busy machine
    # One per interval at most (plus the first), not one per call.
    assert 1 <= len(views) <= elapsed / interval + 2 and len(views) < step / 5, (len(views), step, elapsed)
    # The summary ends the output: the detach line, then the last values.
    detached = max(i for i, line in enumerate(lines) if "detached" in line)
    last = [line for line in lines[detached + 1 :] if line.startswith("[tracking-core]   last: actor")]
    assert last, lines[-4:]
    assert f"train/step={step - 1} " in last[0] and f"{2 * step} values" in last[0]


def test_blocked_stderr_blocks_neither_log_metrics_nor_finish(tmp_path: Path) -> None:
    r, w = full_pipe()
    try:
        backend = ConsoleBackend(context(tmp_path, 0.05), fd=w)
        backend.open_run(run=backend.context, target={})
        worst = 0.0
        for step in range(300):
            t0 = time.perf_counter()
            backend.log_metrics(records(step, role="driver"))
            worst = max(worst, time.perf_counter() - t0)
            if step % 50 == 0:
                time.sleep(0.06)  # let the writer try, and block, on the full pipe
        t0 = time.monotonic()
        backend.close_run(status=RunStatus.FINISHED, run=backend.context)
        took = time.monotonic() - t0
        assert worst < 0.05, worst
        assert WRITE_BOUND - 0.05 <= took <= WRITE_BOUND + 0.5, took  # waited its bound, no more
    finally:
        os.close(r)  # the blocked writer thread gets EPIPE and ends
        os.close(w)


def test_views_a_closed_stderr_did_not_take_are_counted_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r, w = os.pipe()
    os.close(r)  # nobody will ever read: every write fails (EPIPE)
    try:
        backend = ConsoleBackend(context(tmp_path, 0.01), fd=w)
        backend.open_run(run=backend.context, target={})
        backend.log_metrics(records(0, role="driver"))
        time.sleep(0.1)  # the writer tries the view and fails
        with caplog.at_level("WARNING", logger="tracking_core.backends.console"):
            backend.close_run(status=RunStatus.FINISHED, run=backend.context)
    finally:
        os.close(w)
    said = [r.getMessage() for r in caplog.records if "not shown" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("console: 2 view(s) of run job-1 not shown"), said


CHILD = JOBS / "console.py"


@pytest.mark.slow
@pytest.mark.parametrize("delivery", ["process", "thread"])
def test_a_job_whose_stderr_nobody_reads(tmp_path: Path, delivery: str) -> None:
    r, w = full_pipe()
    out = tmp_path / "out.json"
    try:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(tmp_path / "td"), delivery, str(out)],
            stdout=subprocess.DEVNULL, stderr=w, env=python_env(), cwd=tmp_path,
        )
        code = proc.wait(timeout=60)
    finally:
        os.close(w)
        os.close(r)
    assert code == 0
    result = json.loads(out.read_text())
    assert result["worst"] < 0.05, result
    # Two writers, each waiting its bound at most for its summary, plus delivery itself.
    assert WRITE_BOUND - 0.1 <= result["finish"] < 2 * WRITE_BOUND + 3.0, result
    assert result["drained"] == [True, True] and result["failures"] == [{}, {}], result


def test_the_console_is_an_ordinary_plugin() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "plugins"], capture_output=True, text=True,
        env=python_env(), timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("console", "swanlab", "trackio"):
        assert name in proc.stdout
    spec = tracking_core.get_plugin_manager().backends["console"]
    assert (spec.requires, spec.missing()) == ((), [])


def test_rich_records_get_a_one_line_note(tmp_path: Path) -> None:
    from tracking_core.records import ArtifactRecord, HistogramRecord, TableRecord, TextRecord

    r, w = os.pipe()
    backend = ConsoleBackend(context(tmp_path, 0.05, role="actor"), fd=w)
    backend.attach_run(run=backend.context, attach={})
    now = time.time()
    base = {"timestamp": now, "role": "actor", "prefix": "actor/"}
    pause = 0.15  # three intervals: each note gets a view of its own
    backend.log_table(table=TableRecord("samples", ("prompt", "reward"), (("a", 1.0), ("b", 0.0)), 3, seq=1, step_key="rollout/step", **base))
    time.sleep(pause)
    backend.log_histogram(histogram=HistogramRecord(
        "rewards", (2, 1), (0.0, 0.5, 1.0), 3, 0.0, 1.0, 1.5, 1.25, {"p50": 0.5}, 3, seq=2, **base
    ))
    time.sleep(pause)
    backend.log_text(text=TextRecord("think", "<think>hm</think>", 3, seq=3, **base))
    time.sleep(pause)
    backend.log_artifact(artifact=ArtifactRecord(
        "ckpt", "checkpoint", "/snap", "/src", True, 30, (("a.bin", 10), ("b.bin", 20)), seq=4, **base
    ))
    time.sleep(0.2)
    backend.close_run(status=RunStatus.FINISHED, run=backend.context)
    os.close(w)
    out = b"".join(iter(lambda: os.read(r, 65536), b"")).decode()
    os.close(r)
    assert "latest of 1 other records: table samples (2 rows x 2 columns) at step 3" in out
    assert "latest of 2 other records: histogram rewards (3 values, mean 0.5, min 0, max 1) at step 3" in out
    assert "latest of 3 other records: text think (17 characters) at step 3" in out
    assert out.splitlines()[-1].endswith("latest of 4 other records: checkpoint actor/ckpt (2 files, 30 bytes)")
