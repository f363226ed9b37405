"""Defect 5: a process forked from a writer never closes the parent's run nor takes its
values; a forked child that logs gets its own journal or is told to ``attach``; a spawned child
that attaches works."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.conftest import Faults, journal_files, once, only
from tests.helpers.subprocess_python import JOBS

FORK_JOB = JOBS / "fork_os.py"


def _assert_parent_run_intact(faults: Faults, summary: dict) -> None:
    calls = faults.calls()
    assert only(faults.metrics(), ["x"]) == once(["x"], range(200))
    assert only(faults.metrics(raw=True), ["x"]) == once(["x"], range(200))
    assert summary["logged"] == 200
    assert summary["backends"]["faulty"]["delivered"] == 200
    assert summary["backends"]["faulty"]["undelivered"] == 0
    primary_closes = [i for i, c in enumerate(calls) if c.get("ev") == "close" and c.get("primary")]
    assert [calls[i]["status"] for i in primary_closes] == ["FINISHED"], primary_closes
    last_x = max(i for i, c in enumerate(calls) if c.get("ev") == "metric" and c["name"] == "x")
    assert primary_closes[0] > last_x, "the run was closed before the parent's last values arrived"


@pytest.mark.slow
def test_os_fork_child_never_closes_the_parents_run(faults: Faults, tmp_path: Path, jobs) -> None:
    td = tmp_path / "td"
    job = jobs(FORK_JOB, faults.env(), args=[td]).wait()
    assert job.result["child_status"] == 0
    summary = job.result["summary"]
    assert summary["status"] == "FINISHED" and summary["drained"] is True, summary["describe"]
    _assert_parent_run_intact(faults, summary)
    child = only(faults.metrics(), ["child"])
    told = [line for line in job.stderr.splitlines() if "attach" in line]
    # The child's values went through a journal of its own, or the child was told to attach.
    assert child == once(["child"], range(10)) or (not child and told), (child, job.stderr[-3000:])
    assert journal_files(td) == []


MP_JOB = JOBS / "fork_multiprocessing.py"


@pytest.mark.slow
def test_multiprocessing_fork_child_is_told_and_a_spawned_child_attaches(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    job = jobs(MP_JOB, faults.env(), args=[td]).wait(180)
    result = job.result
    assert result["forked"] == 0 and result["spawned"] == 0, job.stderr[-3000:]
    summary = result["summary"]
    assert summary["status"] == "FINISHED" and summary["drained"] is True, summary["describe"]
    _assert_parent_run_intact(faults, summary)
    # The spawned child attached: its values arrived, under its role, once.
    assert only(faults.metrics(), ["spawned/y"]) == once(["spawned/y"], range(50))
    # The fork child's values do not vanish without a word: it is told to attach.
    told = [
        line for line in job.stderr.splitlines() if line.startswith("WARNING") and "attach" in line
    ]
    assert told, job.stderr[-3000:]
    forkchild = only(faults.metrics(), ["forkchild"])
    assert forkchild in (once(["forkchild"], range(10)), once(["forkchild"], []))
    assert journal_files(td) == []
