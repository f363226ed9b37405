"""The reduction's math (exact means, sums, extremes; the quantile sketch's stated error) and a
single process, which reduces over itself alone, read back from a real tracker's files."""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tracking_core as tc
from tracking_core import reduce as rd


def _partials(calls: list[tuple[str, rd.Reducer]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for key, value in calls:
        rd.add(out, key, value)
    return out


def _roundtrip(by_rank: dict[int, dict[str, list[Any]]]) -> dict[int, dict[str, list[Any]]]:
    """As the partials travel: JSON through the job's store."""
    return {r: json.loads(json.dumps(p)) for r, p in by_rank.items()}


def test_uneven_shards_and_zero_weights_reduce_as_one_process_over_all_the_data() -> None:
    rng = random.Random(7)
    shards = [[(rng.uniform(-3, 3), rng.randint(0, 50)) for _ in range(n)] for n in (1, 17, 0, 240)]
    shards[0] = [(float("nan"), 0)]  # a rank with no data: weight 0, even a NaN value adds nothing
    by_rank = {}
    for rank, shard in enumerate(shards):
        calls: list[tuple[str, rd.Reducer]] = []
        for v, w in shard:
            calls += [
                ("loss", tc.Mean(v, weight=w)),
                ("tokens", tc.Sum(w)),
                ("hi", tc.Max(v)),
                ("lo", tc.Min(v)),
            ]
        if not shard:  # a rank with an empty shard reports no data
            calls += [("loss", tc.Mean(0.0, weight=0)), ("tokens", tc.Sum(0))]
        if shard and not math.isnan(shard[0][0]):
            calls.append(("only_some", tc.Mean(shard[0][0])))
        by_rank[rank] = _partials(calls)
    out = rd.reduce(_roundtrip(by_rank), size=4)
    data = [(v, w) for shard in shards for v, w in shard if w]
    values = np.array([v for v, _ in data], dtype=np.float64)
    weights = np.array([w for _, w in data], dtype=np.float64)
    assert out["loss"] == pytest.approx(float((values * weights).sum() / weights.sum()), rel=1e-9)
    assert out["tokens"] == sum(w for shard in shards for _, w in shard)
    finite = [v for shard in shards for v, _ in shard if not math.isnan(v)]
    assert out["hi"] == max(finite) and out["lo"] == min(finite)  # a NaN is left out of max and min
    # every rank gave loss and tokens; the extremes and "only_some" came from ranks 1 and 3
    assert "loss/ranks" not in out and "tokens/ranks" not in out
    assert out["only_some/ranks"] == out["hi/ranks"] == 2.0
    assert out["only_some"] == pytest.approx((shards[1][0][0] + shards[3][0][0]) / 2, rel=1e-12)


def test_a_mean_whose_weights_are_all_zero_is_not_logged() -> None:
    out = rd.reduce(
        {
            0: _partials([("x", tc.Mean(1.0, weight=0))]),
            1: _partials([("x", tc.Mean(2.0, weight=0))]),
        },
        2,
    )
    assert "x" not in out


def test_small_quantiles_are_exact_over_every_ranks_values() -> None:
    rng = random.Random(1)
    shards = [[rng.gauss(0, 1) for _ in range(n)] for n in (5, 100, 1)]
    by_rank = {r: _partials([("reward", tc.Quantiles(s))]) for r, s in enumerate(shards)}
    by_rank[1] = _partials(
        [
            ("reward", tc.Quantiles(np.array(shards[1][:50]))),
            ("reward", tc.Quantiles(shards[1][50:])),
        ]
    )
    out = rd.reduce(_roundtrip(by_rank), size=3)
    every = np.array([x for s in shards for x in s])
    for name, q in (("p5", 0.05), ("p50", 0.5), ("p95", 0.95)):
        assert out[f"reward/{name}"] == pytest.approx(float(np.quantile(every, q)), rel=1e-12)
    assert out["reward/mean"] == pytest.approx(float(every.mean()), rel=1e-12)
    assert (out["reward/min"], out["reward/max"]) == (every.min(), every.max())


def test_large_quantiles_merge_a_sketch_within_its_stated_error() -> None:
    rng = np.random.default_rng(3)
    shards = [
        rng.lognormal(0, 2, 30_000) * rng.choice([-1, 1], 30_000),
        rng.normal(5, 1, 7_000),
        np.zeros(100),
    ]
    by_rank = {r: _partials([("x", tc.Quantiles(s))]) for r, s in enumerate(shards)}
    assert all(p["x"][6] is not None for p in list(by_rank.values())[:2])  # past EXACT: sketched
    out = rd.reduce(_roundtrip(by_rank), size=3)
    every = np.sort(np.concatenate(shards))
    for name, q in (("p5", 0.05), ("p50", 0.5), ("p95", 0.95)):
        exact = every[int(q * (len(every) - 1))]  # the order statistic the bound is stated for
        assert abs(out[f"x/{name}"] - exact) <= rd.ALPHA * abs(exact) + 1e-300, (
            name,
            out[f"x/{name}"],
            exact,
        )
    assert out["x/mean"] == pytest.approx(float(every.mean()), rel=1e-9)
    assert (out["x/min"], out["x/max"]) == (every.min(), every.max())


def test_the_sketch_stays_bounded() -> None:
    sk = rd._sketch(10.0**e for e in np.linspace(-300, 300, 50_000))
    assert len(sk[0]) <= rd.MAX_BUCKETS


def test_phases_name_the_slowest_rank() -> None:
    out = rd.phases(
        {0: {"rollout": 1.5}, 3: {"rollout": 2.5, "train": 1.0}, 5: {"rollout": 0.5}}, 3
    )
    assert out["perf/rollout/max"] == 2.5 and out["perf/rollout/slowest_rank"] == 3.0
    assert out["perf/rollout/mean"] == pytest.approx(1.5) and out["perf/rollout/min"] == 0.5
    assert out["perf/train/ranks"] == 1.0 and "perf/rollout/ranks" not in out


def _metrics(td: Path) -> dict[tuple[str, int], float]:
    lines = [
        json.loads(line)
        for path in (td / "jsonl").rglob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    return {(m["name"], m["step"]): m["value"] for m in lines if m.get("type") == "metric"}


def test_one_process_reduces_over_itself_alone(tmp_path: Path) -> None:
    run = tc.start_run(backends=["jsonl"], tracking_dir=tmp_path, delivery="thread")
    for step in range(3):
        with run.timer("rollout", step=step):
            pass
        run.log_metrics(
            {"loss": tc.Mean(float(step), weight=4), "lr": 0.1, "r": tc.Quantiles([1.0, 2.0, 3.0])},
            step=step,
        )
        run.log_metrics({"tokens": tc.Sum(10)}, step=step)
    run.finish()
    got = _metrics(tmp_path)
    for step in range(3):
        assert (
            got[("loss", step)] == float(step)
            and got[("tokens", step)] == 10.0
            and got[("lr", step)] == 0.1
        )
        assert got[("r/p50", step)] == 2.0 and got[("r/max", step)] == 3.0
        assert (
            got[("perf/rollout/slowest_rank", step)] == 0.0 and got[("perf/rollout/max", step)] >= 0
        )
    assert not [k for k in got if k[0].endswith("/ranks")]
    trace = json.loads((run.run_dir / "trace-primary.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["args"]["step"]) for e in spans] == [("rollout", s) for s in range(3)]


def test_the_training_thread_only_appends() -> None:
    null = tc.NullRun(None, "actor")
    null.log_metrics({"x": tc.Mean(1.0)}, step=0)
    gatherer = null._gatherer
    assert gatherer is not None and gatherer.size == 1
    null.finish()
    assert gatherer.closed and not gatherer.thread.is_alive()


class _Run:
    """What a gatherer needs of its run: the writer's ``log_metrics`` records what it logs."""

    def __init__(self, writer: bool) -> None:
        self.is_writer, self.role, self.run_id = writer, "actor", "r1"
        self.logged: list[tuple[int, dict[str, float]]] = []

    def log_metrics(self, values: dict[str, float], step: int, step_key: str | None = None) -> None:
        self.logged.append((step, dict(values)))

    def log_artifact(self, *args: object, **kwargs: object) -> None:
        pass


@pytest.fixture
def two_ranks(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Two gatherers of one role, a writer and rank 1, over a real c10d TCPStore in this process;
    a step goes idle after 0.2 s."""
    dist = pytest.importorskip("torch.distributed")
    from tests.helpers.mlflow_server import free_port

    store = dist.TCPStore("127.0.0.1", free_port(), 1, True, wait_for_workers=False)
    monkeypatch.setattr(rd, "IDLE", 0.2)
    layouts = iter([(store, "q", 0, 2, True), (store, "q", 1, 2, True)])
    monkeypatch.setattr(rd, "_layout", lambda run: next(layouts))
    writer, other = _Run(True), _Run(False)
    gatherers = rd.Gatherer(writer), rd.Gatherer(other)
    yield writer, gatherers
    for g in gatherers:
        g.stop.set()
        g.thread.join(1)


def _wait_for(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


def test_an_idle_step_is_published_without_moving_past_it(two_ranks: Any) -> None:
    """A rank that never logs a later step, flushes or finishes (a training actor killed at the
    job's end) has its last step logged once that step goes idle."""
    writer, (g0, g1) = two_ranks
    for rank, g in enumerate((g0, g1)):
        g.items.append((None, 0, {"tokens": tc.Sum(rank + 1), "loss": tc.Mean(rank, weight=1)}))
    _wait_for(lambda: writer.logged)
    assert writer.logged == [(0, {"tokens": 3.0, "loss": 0.5})]  # both ranks: no /ranks key


def test_a_steps_later_keys_are_logged_and_its_logged_keys_are_not_logged_again(
    two_ranks: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A rank adds to a step after it went idle and was logged (a phase that ends later than the
    step's first values): the new keys are reduced and logged at the same step; a key already
    logged at that step is not logged twice, and that is said."""
    writer, (g0, g1) = two_ranks
    for rank, g in enumerate((g0, g1)):
        g.items.append((None, 0, {"rollout/n": tc.Sum(rank + 1)}))
    _wait_for(lambda: len(writer.logged) == 1)
    for rank, g in enumerate((g0, g1)):
        g.items.append((None, 0, {"train/n": tc.Sum(10 * (rank + 1)), "rollout/n": tc.Sum(100)}))
    _wait_for(lambda: len(writer.logged) == 2)
    assert writer.logged == [(0, {"rollout/n": 3.0}), (0, {"train/n": 30.0})]
    assert "rollout/n arrived after that step's value was logged" in caplog.text
    for rank, g in enumerate((g0, g1)):  # the next step as before
        g.items.append((None, 1, {"rollout/n": tc.Sum(rank + 1)}))
    _wait_for(lambda: len(writer.logged) == 3)
    assert writer.logged[2] == (1, {"rollout/n": 3.0})
