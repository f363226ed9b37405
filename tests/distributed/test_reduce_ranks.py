"""Reduced values across the 4 ranks of one torchrun world, read back from the jsonl tracker's
files: each equals one process's computation over the ranks that reported (float64, 1e-9), with
a zero weight, a skipped step, a key one rank logs and a rank that dies; no hang; the phase
series and a trace file with every live rank's spans."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.torchrun import job_env, torchrun
from tests.jobs import megatron_reduce_worker as megatron_job
from tests.jobs import reduce_worker as job


def _ranks(step: int) -> list[int]:
    """The ranks whose values of ``step`` reach the writer: a rank publishes a step once it moves
    past it or the step has been idle for a second, so the rank that dies 0.2 s after its step 3,
    at step 4, never published its step 3."""
    return [
        r
        for r in range(4)
        if (r, step) != job.SKIPS and not (r == job.DIES[0] and step >= job.DIES[1] - 1)
    ]


def _torchrun(tmp_path: Path, worker: Path, **extra: str) -> tuple[str, dict[tuple[str, int], float], dict[str, str]]:
    """Four local ranks of ``worker`` logging to jsonl: the run id, the actor's metrics by (name,
    step), and the environment they ran with."""
    reports = tmp_path / "reports"
    reports.mkdir()
    env = job_env(
        tmp_path, REPORT_DIR=str(reports), TRACKING_CORE_BACKENDS="jsonl", TRACKING_CORE_REDUCE_WAIT="2", **extra
    )
    started = time.monotonic()
    done = torchrun(worker, 4, tmp_path, env)
    took = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert took < 120, took
    run_id = json.loads((reports / "0.json").read_text())["run_id"]
    lines = [
        json.loads(x)
        for p in (tmp_path / "tracking" / "jsonl").rglob("actor*.jsonl")
        for x in p.read_text().splitlines()
    ]
    return run_id, {(m["name"], m["step"]): m["value"] for m in lines if m.get("type") == "metric"}, env


@pytest.mark.slow
def test_every_rank_counts_exactly(tmp_path: Path) -> None:
    run_id, got, env = _torchrun(tmp_path, Path(job.__file__))
    for step in range(job.STEPS):
        ranks = _ranks(step)
        losses = np.array([job.loss(r, step) for r in ranks], dtype=np.float64)
        weights = np.array([job.WEIGHTS[r] for r in ranks], dtype=np.float64)
        rewards = np.array([job.loss(r, step) * k for r in ranks for k in range(1, 11)])
        want = {
            "actor/train/loss": float((losses * weights).sum() / weights.sum()),
            "actor/train/tokens": float(weights.sum()),
            "actor/train/loss_max": float(losses.max()),
            "actor/train/loss_min": float(losses.min()),
            "actor/rollout/reward/p5": float(np.quantile(rewards, 0.05)),
            "actor/rollout/reward/p50": float(np.quantile(rewards, 0.5)),
            "actor/rollout/reward/p95": float(np.quantile(rewards, 0.95)),
            "actor/rollout/reward/mean": float(rewards.mean()),
            "actor/train/lr": 0.5,
            "actor/only/three": float(step),
            "actor/only/three/ranks": 1.0,
        }
        for key, value in want.items():
            assert math.isclose(got[(key, step)], value, rel_tol=1e-9), (
                key,
                step,
                got.get((key, step)),
                value,
            )
        if len(ranks) < 4:
            assert got[("actor/train/loss/ranks", step)] == len(ranks), step
        else:
            assert ("actor/train/loss/ranks", step) not in got
        assert got[("actor/perf/rollout/slowest_rank", step)] == max(ranks)
        assert got[("actor/perf/rollout/max", step)] >= 0.01 * (max(ranks) + 1)
    trace = json.loads(
        next((tmp_path / "tracking").rglob(f"runs/{run_id}/trace-actor.json")).read_text()
    )
    spans = {(e["pid"], e["args"]["step"]) for e in trace["traceEvents"] if e["ph"] == "X"}
    assert spans == {(r, s) for s in range(job.STEPS) for r in _ranks(s)}
    shown = subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "show", run_id, "--tracking-dir", str(tmp_path / "tracking")],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    # the trace named with what it holds, and delivered to the tracker as an artifact
    assert f"trace-actor.json  ({len(spans)} spans of 4 rank(s))" in shown.stdout, shown.stdout
    assert "actor/trace-actor.json (1)" in shown.stdout, shown.stdout
    assert "ui.perfetto.dev" in shown.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("tp", "pp"), [(2, 1), (1, 2)])
def test_megatrons_data_parallel_group_is_reduced_and_replicas_count_once(tmp_path: Path, tp: int, pp: int) -> None:
    """No group given, Megatron's parallel state initialised: the values of the data-parallel
    group are reduced, those of tensor-parallel rank 1 or of the first pipeline stage (replicas,
    or not final) are left out, and the writer is Megatron's main rank."""
    _, got, _ = _torchrun(tmp_path, Path(megatron_job.__file__), TP=str(tp), PP=str(pp))
    reports = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "reports").glob("rank*.json")}
    (writer,) = [name for name, r in reports.items() if r["writer"]]
    assert reports[writer] == {"writer": True, "dp": 0, "counts": True}
    assert sorted(r["dp"] for r in reports.values() if r["counts"]) == [0, 1]
    for step in range(megatron_job.STEPS):
        values = [megatron_job.value(dp, step) for dp in (0, 1)]
        weights = [megatron_job.weight(dp) for dp in (0, 1)]
        want = math.fsum(v * w for v, w in zip(values, weights, strict=True)) / math.fsum(weights)
        assert math.isclose(got[("actor/train/loss", step)], want, rel_tol=1e-9), (step, got)
        assert got[("actor/train/tokens", step)] == math.fsum(weights)
        assert ("actor/train/loss/ranks", step) not in got  # both of the group's ranks counted


@pytest.mark.slow
def test_ranks_killed_after_their_last_step_keep_it(tmp_path: Path) -> None:
    """Every rank, the writer too, is SIGKILLed a few seconds after its last step without a
    flush or finish (a training actor at Ray's teardown): the last step goes idle, is published
    and logged, and the writer's delivery process delivers it from the journal."""
    from tests.jobs import killed_worker as killed

    kill_after = 1.0 + 2.5  # the reducer's idle time, then the writer's poll and journal
    env = job_env(tmp_path, REPORT_DIR=str(tmp_path), KILL_AFTER=str(kill_after), TRACKING_CORE_BACKENDS="jsonl")
    done = torchrun(killed.__file__, 2, tmp_path, env)
    assert done.returncode != 0  # killed, as meant
    want = {("actor/train/tokens", s): 3.0 for s in range(killed.STEPS)}
    deadline = time.monotonic() + 60  # the delivery process outlives the training process
    got: dict[tuple[str, int], float] = {}
    while time.monotonic() < deadline:
        got = {
            (m["name"], m["step"]): m["value"]
            for p in (tmp_path / "tracking" / "jsonl").rglob("actor*.jsonl")
            for m in map(json.loads, p.read_text().splitlines())
            if m.get("type") == "metric" and m["name"] == "actor/train/tokens"
        }
        if got == want:
            break
        time.sleep(0.5)
    assert got == want, done.stdout[-3000:] + done.stderr[-3000:]
