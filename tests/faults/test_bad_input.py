"""Defect 4: the worst input a training loop can hand over. Nothing raises into the caller, the
value or key a tracker rejects is reported once (key and tracker) and skipped for that tracker
only, everything else is delivered, and the run ends FINISHED.

With the fault backend: NaN, +-inf, ``10**400``, keys that are not strings (``1``, ``None``, a
tuple), strings and tensors as values, and a key the ``faulty`` tracker rejects (``steady``
takes it). With W&B offline for real: the empty key, which W&B refuses.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.faults.conftest import DROP, Faults, explain_sync, once, only, sync
from tests.helpers.subprocess_python import JOBS, python_env
from tests.helpers.wandb_offline import offline_env, read_job

STEPS = 20
PLAIN = ["ok", "nan", "inf", "ninf", "t_scalar"]

JOB = JOBS / "bad_input.py"


@pytest.mark.slow
def test_worst_input_never_raises_and_a_rejected_key_is_skipped_for_that_tracker_only(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    job = jobs(JOB, faults.env(FAULT_REJECT_KEY="bad/key"), args=[td, STEPS]).wait()
    result = job.result
    assert result["raised"] == []
    summary = result["summary"]
    assert summary["status"] == "FINISHED"
    assert [c["status"] for c in faults.events("close")] == ["FINISHED"]
    assert [c["status"] for c in faults.events("close", "steady")] == ["FINISHED"]

    faulty, steady = faults.metrics(), faults.metrics("steady")
    assert only(faulty, PLAIN) == once(PLAIN, range(STEPS))
    assert only(steady, PLAIN) == once(PLAIN, range(STEPS))
    values = {(c["b"], c["name"]): c["value"] for c in faults.calls() if c.get("ev") == "metric"}
    for backend in ("faulty", "steady"):
        assert math.isnan(values[(backend, "nan")])
        assert values[(backend, "inf")] == math.inf and values[(backend, "ninf")] == -math.inf
        assert values[(backend, "t_scalar")] == 1.5
    # The rejected key: skipped for faulty only, counted, and reported once with key and tracker.
    assert not [k for k in faulty if k[0] == "bad/key"]
    assert only(steady, ["bad/key"]) == once(["bad/key"], range(STEPS))
    assert summary["backends"]["faulty"]["rejected"] == STEPS
    assert summary["backends"]["steady"]["rejected"] == 0
    told = job.warnings_mentioning("bad/key")
    assert len(told) == 1 and "faulty" in told[0], job.warnings
    # Not numbers: skipped and counted, never delivered.
    assert summary["skipped"].get("text") == STEPS and summary["skipped"].get("t_vec") == STEPS
    assert not [k for k in faulty | steady if k[0] in ("text", "t_vec")]
    # Every value accounted for: delivered, rejected by the tracker, or skipped as not a number.
    assert summary["logged"] + sum(summary["skipped"].values()) == STEPS * result["per_step"]
    assert sum(steady.values()) == summary["logged"]
    assert sum(faulty.values()) + STEPS == summary["logged"]
    assert faults.metrics(raw=True) == faulty  # no batch re-sent over and over
    assert "Traceback" not in job.stderr, job.stderr[-4000:]

    # Nothing is left for sync to fail on again and again.
    done = sync(td, faults.env(FAULT_REJECT_KEY="bad/key"))
    assert done.returncode == 0, explain_sync(done)
    assert faults.metrics(raw=True) == faulty


WANDB_JOB = JOBS / "bad_input_wandb.py"


@pytest.mark.slow
def test_an_empty_key_does_not_stop_wandb(tmp_path: Path, jobs) -> None:
    pytest.importorskip("wandb")
    env = python_env({**offline_env(tmp_path), "PYTHONUNBUFFERED": "1"}, drop=DROP)
    job = jobs(WANDB_JOB, env, args=[tmp_path / "td"]).wait(180)
    summary = job.result["summary"]
    assert summary["status"] == "FINISHED"
    runs = read_job(tmp_path / "wandb-root", job.result["run_id"])
    assert len(runs) == 1
    rows = [h for h in runs[0].history if "x" in h]
    assert [(h["train/step"], h["x"]) for h in rows] == [(s, s) for s in range(201)]
    assert not any("" in h for h in runs[0].history)
    assert runs[0].exit_code == 0
    told = [
        w
        for w in job.warnings_mentioning("wandb")
        if "''" in w or '""' in w or "empty key" in w.lower() or "empty metric" in w.lower()
    ]
    assert len(told) == 1, job.warnings
    assert summary["journal"] is None, summary["describe"]  # nothing for sync to fail on again
