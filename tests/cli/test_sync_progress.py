"""``tracking-core sync`` after an outage: it says what it does while it delivers (its first
line within 10 s, then at least every 10 s), and the MLflow run it recovers spans the job's own
time (its start and its end), not the sync's.

The MLflow server is down for the whole job; then it is up behind a proxy that holds every
request 0.5 s (a slow server), so that the sync takes well over 10 s; or another process holds
the journal for 15 s, which the sync waits for."""

from __future__ import annotations

import contextlib
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.mlflow_server import MlflowServer, free_port
from tests.helpers.subprocess_python import JOBS, python_env, run_python

DROP = ("TRACKING_CORE_*", "MLFLOW_*")
STEPS, KEYS = 200, 100

JOB = JOBS / "sync_progress_job.py"


class SlowProxy:
    """Listens on ``port`` and forwards each connection to ``target``, every chunk a client sends
    held ``delay`` seconds first: a server that answers slowly."""

    def __init__(self, port: int, target: int, delay: float) -> None:
        self.target, self.delay = target, delay
        self.listener = socket.create_server(("127.0.0.1", port))
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        with contextlib.suppress(OSError), client, socket.create_connection(("127.0.0.1", self.target)) as server:
            while not self.closed:
                ready, _, _ = select.select([client, server], [], [], 1.0)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is client:
                        time.sleep(self.delay)
                        server.sendall(data)
                    else:
                        client.sendall(data)

    def close(self) -> None:
        self.closed = True
        self.listener.close()


@contextlib.contextmanager
def slow_proxy(port: int, target: int, delay: float) -> Iterator[SlowProxy]:
    proxy = SlowProxy(port, target, delay)
    try:
        yield proxy
    finally:
        proxy.close()


def _sync_said(td: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run ``tracking-core sync td``; assert its stderr said something within its first 10 s
    and then at least every 10 s, and that it took long enough for that to mean something.
    Returns what it printed and its stderr lines, each with its time since the start."""
    began = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracking_core", "sync", str(td)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=python_env(drop=DROP),
    )
    assert proc.stderr is not None
    lines = [(time.monotonic(), line.rstrip("\n")) for line in proc.stderr]
    out, _ = proc.communicate(timeout=300)
    ended = time.monotonic()
    said = "\n".join(f"{t - began:6.1f} s  {line}" for t, line in lines)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, said)
    assert proc.returncode == 0, said + "\n" + out
    assert ended - began > 12, f"the sync took only {ended - began:.1f} s: the test proves nothing\n{said}"
    assert lines and lines[0][0] - began <= 10, f"first line after {lines[0][0] - began if lines else None} s:\n{said}"
    gaps = [b[0] - a[0] for a, b in zip(lines, lines[1:], strict=False)] + [ended - lines[-1][0]]
    assert max(gaps) <= 10, f"a gap of {max(gaps):.1f} s between lines:\n{said}"
    return done, said


def _down_job(tmp_path: Path, port: int, steps: int, keys: int) -> dict[str, float]:
    """The job, its tracker down throughout: its start, end and finish times."""
    td = tmp_path / "td"
    job = run_python(JOB, args=[td, f"http://127.0.0.1:{port}", steps, keys], env={"TRACKING_CORE_EXIT_TIMEOUT": "3"}, drop=DROP)
    assert "but its delivery is INCOMPLETE" in job.stderr, job.stderr
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(START|END|FINISHED) (\S+)$", job.stdout, re.M)}


@pytest.mark.slow
def test_sync_says_what_it_does_and_closes_the_run_at_the_jobs_end(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    port = free_port()  # the job's tracker: nothing listens there for the whole job
    times = _down_job(tmp_path, port, STEPS, KEYS)
    with MlflowServer(tmp_path / "server") as server, slow_proxy(port, server.port, 0.5):
        done, said = _sync_said(tmp_path / "td")
        assert f"mlflow: {STEPS * KEYS} values delivered" in done.stdout, done.stdout
        assert re.search(r"\d+ values delivered so far", said), said

        from mlflow.tracking import MlflowClient

        client = MlflowClient(server.uri)
        runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
        assert len(runs) == 1 and runs[0].info.status == "FINISHED", runs
        info = runs[0].info
        # The job's own times: it ended during its finish, not at the sync (seconds later).
        assert times["END"] - 0.01 <= info.end_time / 1000 <= times["FINISHED"] + 0.01, (info.end_time, times)
        assert times["START"] - 1 <= info.start_time / 1000 <= times["END"], (info.start_time, times)


@pytest.mark.slow
def test_sync_says_it_waits_for_the_process_delivering_a_journal(tmp_path: Path) -> None:
    """Another process holds the journal (a killed job's delivery process finishing it, another
    sync): sync waits for it, and says so at least every 10 s."""
    pytest.importorskip("mlflow")
    from tracking_core.delivery.journal import FOLLOWER_LOCK, find_journals, try_lock

    port = free_port()
    _down_job(tmp_path, port, 5, 2)
    (journal,) = find_journals(tmp_path / "td")
    fd = try_lock(journal / FOLLOWER_LOCK)  # held by this process for 15 s, as a delivering one holds it
    assert fd is not None
    with MlflowServer(tmp_path / "server", port=port):
        threading.Timer(15, os.close, args=(fd,)).start()
        done, said = _sync_said(tmp_path / "td")
    assert "mlflow: 10 values delivered" in done.stdout, done.stdout
    assert re.search(r"still waiting for the process delivering .+ \(\d+ s left\)", said), said
