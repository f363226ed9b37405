"""`tracking-core demo`: the main job, run for a few steps with MLflow, TensorBoard and W&B
offline, and read back from each tracker at the locations it printed."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.demo_run import STEPS, DemoRun, demo_run  # noqa: F401 - shared fixture
from tests.helpers.tb_events import read_logdir
from tests.helpers.wandb_offline import merged_config, read_job


@pytest.mark.slow
def test_demo_logs_both_roles_to_all_three(demo_run: DemoRun) -> None:  # noqa: F811
    """The shared demo run (tests/helpers/demo_run.py), read back from each tracker."""
    out_dir = demo_run.out_dir
    stdout = demo_run.stdout
    # the console counts steps as the trackers record them: 0..STEPS-1
    for role in ("actor", "critic"):
        printed = [int(s) for s in re.findall(rf"^\[{role}\] step (\d+)/{STEPS - 1} ", stdout, re.M)]
        assert printed == list(range(STEPS)), (role, stdout[-2000:])

    # the printed locations hold the run
    uri = re.search(r"mlflow ui --backend-store-uri (\S+)", stdout).group(1)
    logdir = re.search(r"tensorboard --logdir (\S+)", stdout).group(1)
    wandb_run_id = re.search(r"W&B offline run (\S+):", stdout).group(1)
    assert uri.startswith("sqlite:///") and str(out_dir) in uri and str(out_dir) in logdir
    # the actor-vs-critic table: the overridden lr and slime's forced critic settings
    table = stdout[stdout.index("Actor vs critic"):]
    for key in ("lr", "kl_coef", "untie_embeddings_and_output_weights", "pipeline_model_parallel_size"):
        assert re.search(rf"^{key}\s", table, re.M), key

    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], max_results=10
    )
    assert len(runs) == 1  # one job, one run
    mlrun = runs[0]
    assert mlrun.info.status == "FINISHED"
    params = mlrun.data.params
    assert params["lr"] == "0.003"  # the launch config, unprefixed
    assert params["actor/lr"] == "0.003" and params["critic/lr"] == "0.01"
    assert params["critic/kl_coef"] == "0" and params["actor/kl_coef"] == "0.0"
    assert params["critic/parallel/pp"] == "2" and params["actor/parallel/dp"] == "2"
    expected_series = {
        "actor/train/pg_loss", "actor/train/entropy", "actor/rollout/reward_mean",
        "critic/train/value_loss", "critic/train/explained_variance",
    }  # fmt: skip
    expected_series |= {  # every rank counts: reduced over the actor's ranks, phases timed
        "actor/rollout/reward_all/p50", "actor/perf/rollout/slowest_rank", "actor/perf/train/max",
        "critic/perf/train/max",
    }  # fmt: skip
    for name in expected_series:
        steps = sorted(m.step for m in client.get_metric_history(mlrun.info.run_id, name))
        assert steps == list(range(STEPS)), name
    # the shard-size-weighted Mean of each rank's mean is the mean of every rank's rewards (to
    # float32's precision: a rank's mean is a float32 tensor's)
    means, alls = (
        {m.step: m.value for m in client.get_metric_history(mlrun.info.run_id, f"actor/rollout/{key}")}
        for key in ("reward_mean", "reward_all/mean")
    )
    assert means.keys() == alls.keys() and all(math.isclose(means[s], alls[s], rel_tol=1e-6) for s in means), (means, alls)

    tb = read_logdir(logdir)
    assert {"launch", "actor", "critic"} <= set(tb)
    for role, tag in (("actor", "train/pg_loss"), ("actor", "rollout/reward_mean"), ("critic", "train/value_loss")):
        assert [s for s, _ in tb[role].scalars[tag]] == list(range(STEPS)), (role, tag)
    # each role's HParams session uses the unprefixed key: one `lr` column, a row per role
    assert tb["critic"].hparams["lr"] == pytest.approx(0.01)
    assert tb["actor"].hparams["lr"] == pytest.approx(0.003)

    wb = read_job(out_dir, wandb_run_id)
    config = merged_config(wb)
    assert config["actor/lr"] == 0.003 and config["critic/lr"] == 0.01 and config["lr"] == 0.003
    history = [row for r in wb for row in r.history]
    for name, axis in (("actor/train/pg_loss", "actor/train/step"), ("critic/train/value_loss", "critic/train/step"),
                       ("actor/rollout/reward_mean", "actor/rollout/step")):
        assert sorted(row[axis] for row in history if name in row) == list(range(STEPS)), name


@pytest.mark.slow
def test_run_sh_demo_keeps_the_callers_working_directory(tmp_path: Path) -> None:
    """`./run.sh demo` from another directory: the data goes to ./tracking-runs *there*, not
    into the checkout (the virtual environment stays the checkout's)."""
    root = Path(__file__).resolve().parents[2]
    before = (root / "tracking-runs").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKING_CORE_", "MLFLOW_"))}
    env["TRACKING_CORE_VENV"] = str(Path(sys.executable).parent.parent)  # the venv under test
    proc = subprocess.run(
        ["bash", str(root / "run.sh"), "demo", "--steps", "1", "--tracking-backends", "jsonl"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [p.name for p in (tmp_path / "tracking-runs" / "jsonl").iterdir()]
    assert (root / "tracking-runs").exists() == before
    # after a clean finish, only the user's data is left: no journal, no exchange files
    left = {p.name for p in (tmp_path / "tracking-runs").rglob("*")}
    assert not left & {"journal", "exchange", "role_args.pkl"}, sorted(left)


@pytest.mark.slow
def test_a_failed_demo_never_says_the_run_finished(tmp_path: Path) -> None:
    """A group that cannot start (a critic world of no ranks) fails the job; the writers that
    ended their part cleanly (the node's system sampler) say so as writers, and nothing says
    "run FINISHED" for the run that failed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKING_CORE_", "MLFLOW_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "demo", "--steps", "1", "--actor-ranks", "1",
         "--critic-ranks", "0", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said[-3000:]
    assert "run FAILED" in proc.stdout, proc.stdout[-3000:]
    assert re.search(r"tracking-core writer system-\S+ finished; mlflow: \d+ of \d+ values delivered", said), said[-3000:]
    assert "run FINISHED" not in said, said[-3000:]
