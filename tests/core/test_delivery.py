"""Delivery guarantees of the in-process dispatch: exit without finish, failure isolation."""

from __future__ import annotations

import json
from pathlib import Path

from tests.core.conftest import make_dist
from tests.helpers.subprocess_python import JOBS, run_python


def test_exit_without_finish_still_delivers(tmp_path: Path) -> None:
    out = run_python(
        JOBS / "delivery_exit_without_finish.py",
        args=[tmp_path],
    )
    run_id = out.stdout.strip()
    lines = [
        json.loads(line)
        for line in (tmp_path / "jsonl" / run_id / "actor.jsonl").read_text().splitlines()
    ]
    metrics = [m for m in lines if m["type"] == "metric"]
    assert len(metrics) == 1000
    assert sorted({m["step"] for m in metrics}) == list(range(500))
    status = [m for m in (tmp_path / "jsonl" / run_id / "primary.jsonl").read_text().splitlines() if '"status"' in m]
    assert json.loads(status[-1])["status"] == "FINISHED"


def test_uncaught_exception_marks_the_run_failed(tmp_path: Path) -> None:
    out = run_python(
        JOBS / "delivery_uncaught.py",
        args=[tmp_path],
        check=False,
    )
    assert out.returncode == 1 and "training blew up" in out.stderr
    run_id = out.stdout.strip()
    primary = (tmp_path / "jsonl" / run_id / "primary.jsonl").read_text().splitlines()
    assert json.loads(primary[-1])["status"] == "FAILED"


FLAKY = (JOBS / "delivery_failing.py").read_text(encoding="utf-8")


def test_a_failing_backend_never_reaches_the_caller_or_the_others(site: Path, tmp_path: Path) -> None:
    make_dist(site, "failing-tracking", {"failing": "failing_plugin"}, {"failing_plugin": FLAKY})
    out = run_python(
        JOBS / "delivery_failing_run.py",
        args=[tmp_path],
        site=site,
    )
    run_id, described = out.stdout.strip().splitlines()
    assert "jsonl: 200 of 200 values delivered" in described
    assert "failing: 0 of 200 values delivered, 200 NOT delivered, close NOT acknowledged, failures: log_metrics: ConnectionError x" in described
    # reported once, then counted: the incomplete run's end names the cause with its count
    assert out.stderr.count("tracker unreachable") == 2
    assert out.stderr.count("failed in log_metrics: ConnectionError: tracker unreachable;") == 1
    assert "failing failed: ConnectionError: tracker unreachable (reported 1x: log_metrics)" in out.stderr
    primary = (tmp_path / "jsonl" / run_id / "primary.jsonl").read_text()
    assert primary.count('"type": "metric"') == 200


def test_a_run_nobody_holds_is_still_delivered_at_exit(tmp_path: Path) -> None:
    out = run_python(
        JOBS / "delivery_unheld.py",
        args=[tmp_path],
    )
    actor = (tmp_path / "jsonl" / out.stdout.strip() / "actor.jsonl").read_text()
    assert actor.count('"type": "metric"') == 50
