"""Defect 8 (and 9's start bound and retry noise): ``tracking-core sync`` replays to the job's
own target. A job whose MLflow server (from ``$MLFLOW_TRACKING_URI``) is down for the whole run
keeps everything in its journal; ``sync`` from a shell *without* that variable, once the server
is back, delivers everything there -- not into a new local SQLite store. Where the target
cannot be known, ``sync`` refuses and says what to set; it never guesses."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import DROP, explain_sync, journal_files, sync
from tests.faults.mlflow_runs import steps_of, the_run
from tests.helpers.mlflow_server import MlflowServer, free_port
from tests.helpers.subprocess_python import JOBS, python_env

pytest.importorskip("mlflow")

JOB = JOBS / "sync_target.py"


def _job_with_server_down(tmp_path: Path, jobs, uri: str):
    td = tmp_path / "td"
    env = python_env({"MLFLOW_TRACKING_URI": uri, "TRACKING_CORE_EXIT_TIMEOUT": "5"}, drop=DROP)
    job = jobs(JOB, env, args=[td]).wait(120)
    result = job.result
    assert result["summary"]["journal"], result["summary"]["describe"]
    return td, job


def _shell_without_the_jobs_environment() -> dict[str, str]:
    return python_env(drop=DROP)


def _no_local_store(td: Path, cwd: Path) -> None:
    assert not (td / "mlflow").exists(), "sync created a local MLflow store instead"
    assert not list(cwd.rglob("mlruns")) and not list(cwd.rglob("*.db")), list(cwd.rglob("*"))


@pytest.mark.slow
def test_sync_replays_to_the_server_the_job_had_from_its_environment(tmp_path: Path, jobs) -> None:
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    td, job = _job_with_server_down(tmp_path, jobs, uri)
    result = job.result
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with MlflowServer(tmp_path / "server", port=port) as server:
        done = sync(td, _shell_without_the_jobs_environment(), cwd=elsewhere)
        assert done.returncode == 0, explain_sync(done)
        mlrun = the_run(server.uri, result["run_id"])
        for key in ("loss", "reward"):
            assert steps_of(server.uri, mlrun.info.run_id, key) == list(range(50)), key
        assert "train/step" not in mlrun.data.metrics  # the axis is the metrics' step, no series
        assert mlrun.data.params.get("lr") == "0.1"
        assert mlrun.info.status == "FINISHED"
    _no_local_store(td, elsewhere)
    assert journal_files(td) == []
    # Start never waits for a tracker; finish does not wait its whole timeout for a dead one.
    assert result["start_took"] < 3, result
    assert result["finish_took"] < 6, result
    # One outage, one report: not urllib3's retry warning for every request.
    assert job.stderr.count("Retrying (Retry(") <= 1, job.stderr[-4000:]


def _scrub(value: Any, needle: str) -> tuple[Any, int]:
    """``value`` with every string holding ``needle`` removed (dict entries, list items)."""
    removed = 0
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(item, str) and needle in item:
                removed += 1
                continue
            out[key], n = _scrub(item, needle)
            removed += n
        return out, removed
    if isinstance(value, list):
        items = []
        for item in value:
            if isinstance(item, str) and needle in item:
                removed += 1
                continue
            scrubbed, n = _scrub(item, needle)
            items.append(scrubbed)
            removed += n
        return items, removed
    return value, 0


def forget_target(td: Path, needle: str) -> int:
    """Remove every trace of the job's target (a string holding ``needle``) from what the job
    left on disk -- the saved run handle, the journal's meta and records -- as a journal copied
    from an older version, or a handle lost, would be."""
    removed = 0
    for path in sorted(p for p in td.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if needle.encode() not in data:
            continue
        text = data.decode()
        try:
            if path.suffix == ".jsonl":
                lines = []
                for line in text.splitlines():
                    scrubbed, n = _scrub(json.loads(line), needle) if line.strip() else ("", 0)
                    removed += n
                    lines.append(json.dumps(scrubbed) if line.strip() else line)
                path.write_text("\n".join(lines) + "\n")
            else:
                scrubbed, n = _scrub(json.loads(text), needle)
                removed += n
                path.write_text(json.dumps(scrubbed))
        except ValueError:
            raise AssertionError(
                f"the target is kept in {path}, not JSON: update forget_target"
            ) from None
    return removed


@pytest.mark.slow
def test_sync_refuses_when_it_cannot_know_the_target(tmp_path: Path, jobs) -> None:
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    td, _job = _job_with_server_down(tmp_path, jobs, uri)
    forget_target(td, f"127.0.0.1:{port}")
    kept = journal_files(td)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = sync(td, _shell_without_the_jobs_environment(), cwd=elsewhere)
    said = done.stdout + done.stderr
    assert done.returncode == 1, explain_sync(done)
    assert "MLFLOW_TRACKING_URI" in said or "mlflow-tracking-uri" in said, explain_sync(done)
    _no_local_store(td, elsewhere)
    assert [p for p in kept if p.exists()], "the journal went although nothing was delivered"
    assert os.path.exists(td / "journal")
