"""Recovery that always ends, and trackers that cannot take each other down.

* ``tracking-core sync`` right after a kill -9 of the training process, while the delivery process
  is still finishing the journal, and three of them at once: each waits for (or steps aside from)
  that process and exits 0 once everything is delivered, whoever delivered it; jsonl and a real
  MLflow server hold every value once.
* A tracker call that never returns (a real plugin whose ``log_metrics`` blocks for ever): sync
  ends within its ``--timeout``, names the tracker and says to run it again; the other tracker
  got everything.
* A tracker whose client aborts its process (a real plugin calling ``os.abort()``): live, the
  delivery process is restarted without it once it crashed it three times, and jsonl gets every
  value; in sync, each tracker is delivered in a process of its own, so the abort costs that
  tracker only.

The trackers that hang and abort are a real installed distribution (entry points), so the
training process, its delivery process and every process sync starts load them the same way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.core.conftest import make_dist
from tests.faults.conftest import Faults, explain_sync, journal_files, once
from tests.faults.mlflow_runs import steps_of, the_run
from tests.helpers.mlflow_server import MlflowServer
from tests.helpers.subprocess_python import JOBS


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("broken-site")
    broken = (JOBS / "recovery_broken_trackers.py").read_text(encoding="utf-8")
    make_dist(site, "broken-trackers", {"broken": "broken_trackers"}, {"broken_trackers": broken})
    return site


def _env(faults: Faults, site: Path, **extra: str) -> dict[str, str]:
    env = faults.env(**extra)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return env


def _sync(td: Path, env: dict[str, str], *args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "sync", "--quiet", *args, str(td)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    return proc, time.monotonic() - started


def jsonl_counts(td: Path) -> tuple[Counter[tuple[str, int]], int]:
    """Each (name, step) the jsonl files hold, once per distinct record, and every line."""
    seen: set[tuple[object, ...]] = set()
    counts: Counter[tuple[str, int]] = Counter()
    lines = 0
    for path in sorted((td / "jsonl").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            obj = json.loads(line)
            if obj.get("type") != "metric":
                continue
            lines += 1
            ident = (obj["name"], obj["step"], obj["value"], obj["ts"])
            if ident not in seen:
                seen.add(ident)
                counts[(obj["name"], obj["step"])] += 1
    return counts, lines


# -- a sync right after a kill -9 ------------------------------------------------------------------
KILLED_JOB = JOBS / "recovery_killed.py"


@pytest.mark.slow
def test_three_syncs_right_after_a_kill_wait_for_the_finishing_delivery_process_and_exit_0(
    mlflow_server: MlflowServer, faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    env = faults.env(TRACKING_CORE_EXIT_TIMEOUT="30")
    job = jobs(KILLED_JOB, env, args=[td, mlflow_server.uri])
    run_id = job.readline_until("RUN ")
    delivery = int(job.readline_until("DELIVERY "))
    flushed = int(job.readline_until("FLUSHED "))
    # The delivery process is caught mid-way (stopped), the training process killed: what the
    # documented recovery meets when the delivery process has a backlog to finish.
    os.kill(delivery, signal.SIGSTOP)
    try:
        os.kill(job.proc.pid, signal.SIGKILL)
        job.proc.wait(10)
        syncs = []
        for i in range(3):
            err = (tmp_path / f"sync{i}.err").open("w")
            syncs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "tracking_core.cli", "sync", str(td)],
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    env=env,
                )
            )
        # All three are waiting for the journal's follower before it goes on.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all("waiting up to" in (tmp_path / f"sync{i}.err").read_text() for i in range(3)):
                break
            time.sleep(0.1)
        else:
            raise AssertionError([(tmp_path / f"sync{i}.err").read_text()[-2000:] for i in range(3)])
    finally:
        os.kill(delivery, signal.SIGCONT)
    for i, proc in enumerate(syncs):
        out, _ = proc.communicate(timeout=120)
        err = (tmp_path / f"sync{i}.err").read_text()
        assert proc.returncode == 0, f"sync {i} exited {proc.returncode}\n{out}\n{err[-4000:]}"
        assert "Traceback" not in err, err[-4000:]
    assert journal_files(td) == []
    got, _ = jsonl_counts(td)
    last = max(step for _, step in got)
    assert last >= flushed - 1
    assert got == once(["loss", "reward"], range(last + 1))
    mlrun = the_run(mlflow_server.uri, run_id)
    for key in ("loss", "reward"):
        assert steps_of(mlflow_server.uri, mlrun.info.run_id, key) == list(range(last + 1)), key
    assert mlrun.info.status == "KILLED"


# -- a tracker call that never returns ------------------------------------------------------------
HANG_JOB = JOBS / "recovery_hang.py"


@pytest.mark.slow
def test_sync_with_a_tracker_that_never_returns_ends_within_its_timeout_and_the_other_gets_everything(
    broken_site: Path, faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    env = _env(faults, broken_site)
    faults.go_down()  # faulty is down for the whole job: its records wait for sync
    job = jobs(HANG_JOB, env, args=[td]).wait(60)
    assert job.result["summary"]["drained"] is False, job.result
    assert faults.metrics() == Counter()
    faults.come_back()
    proc, took = _sync(td, env, "--timeout", "8")
    assert took < 8 + 6, f"sync took {took:.1f} s\n{explain_sync(proc)}"
    assert proc.returncode == 1, explain_sync(proc)
    assert faults.metrics() == once(["x"], range(500)), explain_sync(proc)
    errors = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert errors and all("hang" in line and "faulty" not in line for line in errors), explain_sync(proc)
    assert "log_metrics call had not returned" in proc.stderr, explain_sync(proc)
    assert "tracking-core sync --timeout 8" in proc.stderr, explain_sync(proc)
    # What hang lacks stays; a second sync gives faulty nothing twice.
    assert journal_files(td)
    again, _ = _sync(td, env, "--timeout", "2")
    assert again.returncode == 1, explain_sync(again)
    assert faults.metrics(raw=True) == once(["x"], range(500))


# -- a tracker that aborts its process ------------------------------------------------------------
CRASH_JOB = JOBS / "recovery_crash.py"


@pytest.mark.slow
def test_a_tracker_that_aborts_its_process_costs_no_other_tracker_a_value_live_or_in_sync(
    broken_site: Path, faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    env = _env(faults, broken_site, CRASHY_COUNT=str(tmp_path / "crashy-count"), CRASHY_AFTER="500")
    job = jobs(CRASH_JOB, env, args=[td]).wait(120)
    summary = job.result["summary"]
    got, lines = jsonl_counts(td)
    assert got == once(["x"], range(3000)), f"jsonl live: {sum(got.values())} of 3000\n{job.stderr[-3000:]}"
    assert summary["backends"]["jsonl"]["delivered"] == 3000, summary["describe"]
    assert summary["drained"] is False and summary["journal"], summary["describe"]
    assert "left out of delivery" in summary["describe"] and "SIGABRT" in summary["describe"], summary["describe"]
    left_out = job.warnings_mentioning("crashy", "left out")
    assert len(left_out) == 1, job.warnings
    # sync: the abort costs crashy only; jsonl has nothing more to get and gets nothing twice.
    proc, _ = _sync(td, env)
    assert proc.returncode == 1, explain_sync(proc)
    errors = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert errors and all("crashy" in line and "jsonl" not in line for line in errors), explain_sync(proc)
    assert "SIGABRT" in proc.stderr, explain_sync(proc)
    assert jsonl_counts(td) == (got, lines)
    assert journal_files(td)  # what crashy lacks stays


CRASH_AND_DOWN_JOB = JOBS / "recovery_crash_and_down.py"


@pytest.mark.slow
def test_sync_delivers_every_tracker_in_a_process_of_its_own(
    broken_site: Path, faults: Faults, tmp_path: Path, jobs
) -> None:
    """Both trackers lack everything when sync starts (faulty was down, crashy aborts at its
    first call): faulty gets all 3000 values once, and sync exits 1 naming crashy only."""
    td = tmp_path / "td"
    env = _env(faults, broken_site, CRASHY_COUNT=str(tmp_path / "crashy-count"), CRASHY_AFTER="0")
    faults.go_down()
    job = jobs(CRASH_AND_DOWN_JOB, env, args=[td]).wait(120)
    assert job.result["summary"]["drained"] is False
    assert faults.metrics() == Counter()
    faults.come_back()
    proc, _ = _sync(td, env)
    assert proc.returncode == 1, explain_sync(proc)
    assert faults.metrics(raw=True) == once(["x"], range(3000)), explain_sync(proc)
    errors = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert errors and all("crashy" in line and "faulty" not in line for line in errors), explain_sync(proc)
    assert "SIGABRT" in proc.stderr, explain_sync(proc)
    assert journal_files(td)  # what crashy lacks stays
