"""Two roles in one run, in MLflow, W&B offline, TensorBoard, SwanLab offline and trackio at once:
both roles' configs and metrics are in all five, no key collides, and each tracker holds the same
keys and values as far as it can (MLflow params are strings, TensorBoard scalars float32, W&B
reads 1.0 back as 1, SwanLab keeps a top-level None as the text "null")."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from tracking_mlflow.keys import param_text

import tracking_core
from tests.backends.test_swanlab import S_VARS
from tests.backends.test_swanlab import by_label as swan_by_label
from tests.backends.test_swanlab import read_job as read_swan_job
from tests.backends.test_trackio import T_VARS, read_store
from tests.helpers.tb_events import read_logdir
from tests.helpers.wandb_offline import W_VARS, merged_config, offline_env, read_job

LAUNCH = {"lr": 3e-6, "seed": 7, "use_kl_loss": True, "advantage_estimator": "ppo", "save": None}
ROLES = {
    "actor": {"lr": 1e-6, "eps_clip": 0.2, "micro_batch_size": 2, "loss": "pg", "layers": [2, 3]},
    "critic": {"lr": 1e-5, "eps_clip": 0.2, "micro_batch_size": 4, "loss": "value", "layers": [2, 3]},
}
METRICS = {"actor": ("train/pg_loss", "train/entropy"), "critic": ("train/value_loss",)}
STEPS = 5


def value_at(role: str, key: str, step: int) -> float:
    return (len(key) + 1) / (step + 1) + (0.5 if role == "critic" else 0.0)


def close(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-6)
    return bool(a == b)


@pytest.fixture
def run_all_five(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Path]:
    for name in (*W_VARS, *S_VARS, *T_VARS):
        monkeypatch.delenv(name, raising=False)
    for name, value in offline_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    run = tracking_core.start_run(
        config=LAUNCH,
        backends=["mlflow", "wandb", "tensorboard", "swanlab", "trackio"],
        tracking_dir=tmp_path / "td",
        options={"swanlab_mode": "offline", "trackio_project": "cross"},
        export=False,
    )
    for role, config in ROLES.items():
        child = tracking_core.attach(run.handle, role=role, config=config, writer=True, collect=False)
        for step in range(STEPS):
            child.log_metrics(
                {key: value_at(role, key, step) for key in METRICS[role]},
                step=step,
                step_key="train/step",
            )
        child.finish(timeout=120)  # five trackers per delivery process: slow on a busy machine
    summary = run.finish(timeout=120)
    assert all(not b["undelivered"] and not b["failures"] for b in summary.backends.values()), summary
    return run, tmp_path


@pytest.mark.slow
def test_two_roles_same_keys_and_values_in_all_five(run_all_five: tuple[Any, Path]) -> None:
    from mlflow.tracking import MlflowClient

    run, tmp = run_all_five
    handle = run.handle.backends
    client = MlflowClient(handle["mlflow"]["tracking_uri"])
    ml_run = client.get_run(handle["mlflow"]["run_id"])
    params = ml_run.data.params
    wb_runs = read_job(tmp / "wandb-root", handle["wandb"]["id"])
    wb_config = merged_config(wb_runs)
    wb_history = [row for r in wb_runs for row in r.history]
    tb = read_logdir(handle["tensorboard"]["logdir"])
    assert {"launch", "actor", "critic"} <= set(tb)
    swan = swan_by_label(read_swan_job(Path(handle["swanlab"]["log_dir"]), handle["swanlab"]["id"]))
    assert sorted(swan) == ["actor", "critic", "primary"]  # one directory per writer, one id
    tk = read_store(Path(handle["trackio"]["dir"]), "cross")
    assert tk["runs"] == [run.run_id]
    tk_config, tk_rows = tk["configs"][run.run_id], tk["logs"][run.run_id]

    # config: the launch config unprefixed, each role's under <role>/, in all five
    expected = dict(LAUNCH)
    for role, config in ROLES.items():
        expected.update({f"{role}/{k}": v for k, v in config.items()})
    assert len(expected) == len(LAUNCH) + sum(len(c) for c in ROLES.values())  # no collision
    for key, value in expected.items():
        role, _, bare = key.rpartition("/")
        if value is None:  # a null value is no param anywhere; the config text shows it
            assert key not in params and key not in wb_config and key not in tk_config, key
            assert not [w for w in swan.values() if key in w.config], key
            assert bare in "\n".join(t for ts in tb[role or "launch"].text.values() for t in ts)
            continue
        assert params[key] == param_text(value), key
        assert close(wb_config[key], value), (key, wb_config[key], value)
        hparams = tb[role or "launch"].hparams
        # hparams drop the role's prefix: the role is the TensorBoard run, and one column
        # (``lr``) then holds the launch, actor and critic values side by side
        if isinstance(value, (int, float, str)):
            assert close(hparams[bare], value), (key, hparams[bare], value)
        else:  # lists are no TensorBoard hparams; the full config is in the text
            assert bare not in hparams
        text = "\n".join(t for ts in tb[role or "launch"].text.values() for t in ts)
        assert bare in text
        assert close(swan["primary"].config[key], value), key
        if role:
            assert close(swan[role].config[key], value), key
        assert close(tk_config[key], value), (key, tk_config[key], value)
    assert ml_run.info.status == "FINISHED"
    assert {r.state for r in swan.values()} == {"RUN_STATE_FINISHED"}
    assert tk_config["tracking_core/status"] == "FINISHED"

    # metrics: every role's every step, the same values in all five
    for role, keys in METRICS.items():
        for key in keys:
            name = f"{role}/{key}"
            history = client.get_metric_history(handle["mlflow"]["run_id"], name)
            assert sorted((m.step, m.value) for m in history) == [
                (s, value_at(role, key, s)) for s in range(STEPS)
            ]
            wb_points = sorted((row[f"{role}/train/step"], row[name]) for row in wb_history if name in row)
            assert len(wb_points) == STEPS
            assert all(close(v, value_at(role, key, s)) for s, v in wb_points)
            tb_points = tb[role].scalars[key]
            assert [s for s, _ in tb_points] == list(range(STEPS))
            assert all(math.isclose(v, value_at(role, key, s), rel_tol=1e-6) for s, v in tb_points)
            sw_points = swan[role].scalars[name]
            assert [s for s, _ in sw_points] == list(range(STEPS))
            assert all(close(v, value_at(role, key, s)) for s, v in sw_points)
            tk_points = sorted((r["step"], r[name]) for r in tk_rows if name in r)
            assert [s for s, _ in tk_points] == list(range(STEPS))
            assert all(close(v, value_at(role, key, s)) for s, v in tk_points)
