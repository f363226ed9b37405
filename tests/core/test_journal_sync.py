"""Never lose: journal, spill, circuit breaker, SIGKILL and `tracking-core sync`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.core.conftest import make_dist
from tests.helpers.subprocess_python import JOBS, run_python

# A real backend whose tracker is a file; it is "down" while the marker file exists.
GATED = (JOBS / "journal_sync_gated.py").read_text(encoding="utf-8")


@pytest.fixture
def gated(site: Path, tmp_path: Path) -> dict[str, str]:
    make_dist(site, "gated-tracking", {"gated": "gated_plugin"}, {"gated_plugin": GATED})
    return {
        "GATED_OUT": str(tmp_path / "gated.jsonl"),
        "GATED_DOWN": str(tmp_path / "down"),
        "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }


def _delivered(env: dict[str, str]) -> list[dict]:
    path = Path(env["GATED_OUT"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _sync(tracking_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "sync", str(tracking_dir)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )


JOB = JOBS / "journal_sync_gated_run.py"


def _job(tmp_path: Path, env: dict[str, str], steps: int, down: str | None = None,
         extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run JOB for ``steps`` steps; with ``down``, the tracker is down from step 100 to step 400
    and the run is finished."""
    return run_python(
        JOB,
        args=[tmp_path / "td", str(steps), *([down] if down is not None else [])],
        env={**env, "TRACKING_CORE_EXIT_TIMEOUT": "3", **(extra_env or {})},
        drop=(),
    )


@pytest.mark.slow
def test_tracker_down_for_the_whole_run_then_sync(gated: dict[str, str], tmp_path: Path) -> None:
    Path(gated["GATED_DOWN"]).write_text("down")
    started = time.monotonic()
    out = _job(tmp_path, gated, 300)
    assert time.monotonic() - started < 30  # bounded exit with the tracker down
    assert re.search(r"run `\S*tracking-core sync \S+`", out.stderr)  # the command, runnable as printed
    assert out.stderr.count("gated tracker is down") <= 3  # one report per kind of failure
    assert _delivered(gated) == []
    os.unlink(gated["GATED_DOWN"])
    first = _sync(tmp_path / "td", gated)
    assert first.returncode == 0, first.stderr
    assert "synced 600 values" in first.stdout
    delivered = _delivered(gated)
    metrics = Counter((d["name"], d["step"]) for d in delivered if "name" in d)
    assert metrics == Counter({(n, s): 1 for n in ("actor/loss", "actor/reward") for s in range(300)})
    assert {d["config"] for d in delivered if "config" in d} == {"launch", "actor"}
    assert [d["status"] for d in delivered if "status" in d] == ["FINISHED"]
    second = _sync(tmp_path / "td", gated)
    assert second.returncode == 0 and "synced 0 values" in second.stdout
    assert len(_delivered(gated)) == len(delivered)
    handle = json.loads(next((tmp_path / "td" / "runs").glob("*/handle.json")).read_text())
    assert handle["backends"]["gated"] == {"opened": handle["run_id"]}


@pytest.mark.slow
def test_tracker_down_mid_run_recovers_exactly_once(gated: dict[str, str], tmp_path: Path) -> None:
    down = gated["GATED_DOWN"]
    # the tracker comes back only once a call has met the outage (a loaded machine may deliver late)
    out = _job(tmp_path, gated, 600, down=down,
               extra_env={"TRACKING_CORE_MAX_QUEUE_ROWS": "50"})
    # the outage in two lines: its cause once (later failures only counted), then its end
    assert out.stderr.count("failed in log_metrics: ConnectionError: gated tracker is down") == 1
    assert "backend 'gated' is back after" in out.stderr
    metrics = Counter((d["name"], d["step"]) for d in _delivered(gated) if "name" in d)
    assert metrics == Counter({(n, s): 1 for n in ("actor/loss", "actor/reward") for s in range(600)})
    assert not (tmp_path / "td" / "journal").exists()  # complete: removed


@pytest.mark.slow
def test_sigkill_loses_at_most_the_last_flush_interval(gated: dict[str, str], tmp_path: Path) -> None:
    Path(gated["GATED_DOWN"]).write_text("down")
    proc = subprocess.Popen(
        [sys.executable, str(JOBS / "journal_sync_forever.py"), str(tmp_path / "td")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **gated},
    )
    assert proc.stdout is not None
    printed: list[tuple[int, float]] = []
    started = time.monotonic()
    for line in proc.stdout:
        printed.append((int(line.split()[0]), float(line.split()[1])))
        if time.monotonic() - started > 6:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = time.time()
    os.unlink(gated["GATED_DOWN"])
    # The delivery process outlives the killed one: it takes the journal over and delivers what
    # it holds once the tracker is up (it probes at most every 10 s); sync waits for it to let go
    # of the journal, then replays whatever is left.
    out = _sync(tmp_path / "td", gated)
    assert out.returncode == 0, out.stderr
    delivered = _delivered(gated)
    steps = sorted(d["step"] for d in delivered if "name" in d)
    assert steps == list(range(len(steps)))  # a prefix, no gaps, no duplicates
    assert {"status": "KILLED"} in delivered
    # everything logged more than one flush interval (0.5 s, plus scheduling slack) before the
    # kill is there
    old_enough = [step for step, at in printed if at < killed_at - 0.5 - 0.3]
    assert old_enough and steps[-1] >= old_enough[-1]
    assert steps[-1] > 1000
    assert [d["status"] for d in _delivered(gated) if "status" in d] == ["KILLED"]


def test_sigterm_finishes_the_run_killed(tmp_path: Path) -> None:
    out = run_python(JOBS / "journal_sync_sigterm.py", args=[tmp_path], check=False)
    assert out.returncode == -signal.SIGTERM
    run_id = out.stdout.strip()
    lines = [json.loads(x) for x in (tmp_path / "jsonl" / run_id / "primary.jsonl").read_text().splitlines()]
    assert sum(1 for x in lines if x["type"] == "metric") == 100
    assert lines[-1] == {**lines[-1], "type": "status", "status": "KILLED"}
