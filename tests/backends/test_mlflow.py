"""The MLflow backend against real MLflow: an ``mlflow server`` on 127.0.0.1 and the embedded SQLite
store written by several processes at once. Everything is read back with ``MlflowClient``."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from tracking_mlflow.keys import mlflow_key, mlflow_params

import tracking_core
from tests.helpers.mlflow_server import MlflowServer, free_port, mlflow_server  # noqa: F401
from tests.helpers.subprocess_python import JOBS, finish_python, hiding, start_python
from tracking_core import MetricRecord, RunContext
from tracking_core.config import build_section

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


# run handle, backend selection, MLflow's own settings: none inherited from this process
DROP = ("TRACKING_CORE_RUN", "TRACKING_CORE_BACKENDS", "MLFLOW_TRACKING_URI",
        "MLFLOW_EXPERIMENT_NAME", "PYTEST_CURRENT_TEST")


def _python(
    code: str | Path, env: Mapping[str, str] | None = None, args: Sequence[str] = ()
) -> subprocess.Popen[str]:
    """Start ``code`` (a job file) in a fresh interpreter, from the repository (also on the path)."""
    return start_python(code, args=args, env=env, drop=DROP, site=REPO, cwd=REPO)


def _client(entry: Mapping[str, Any]) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(entry["tracking_uri"])


def _artifact_json(client: Any, run_id: str, path: str) -> dict[str, Any]:
    from mlflow.artifacts import download_artifacts

    local = download_artifacts(run_id=run_id, artifact_path=path, tracking_uri=client.tracking_uri)
    return json.loads(Path(local).read_text())


def _history(client: Any, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def _check_config(
    client: Any,
    run_id: str,
    config: Mapping[str, Any],
    role: str | None,
    latest: Mapping[str, Any] | None = None,
) -> None:
    """Params equal the shaped section of ``config`` (the first one logged: params never change)
    and the JSON artifact holds the ``latest`` config logged for the namespace, losslessly."""
    section = build_section(config, role, "default")
    params = client.get_run(run_id).data.params
    expected = mlflow_params(section).params
    assert {k: params.get(k) for k in expected} == expected
    if latest is not None:
        section = build_section(latest, role, "default")
    doc = _artifact_json(client, run_id, f"config/{section.namespace}.json")
    assert doc["values"] == json.loads(json.dumps(dict(section.values)))


# -- cheap checks, no MLflow call --------------------------------------------------------------
def test_importing_the_plugin_does_not_import_mlflow() -> None:
    assert finish_python(_python(JOBS / "mlflow_plugin_import.py")).stdout.strip() == "ok"


def test_selecting_mlflow_without_mlflow_names_the_extra(tmp_path: Path) -> None:
    site = hiding(tmp_path / "site", "mlflow")
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    out = finish_python(_python(JOBS / "mlflow_unavailable.py", env, [str(tmp_path)])).stdout
    assert "'mlflow'" in out and 'pip install "tracking-core[mlflow]"' in out, out


def test_settings_resolve_options_env_and_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracking_mlflow import settings

    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
        monkeypatch.delenv(name, raising=False)
    ctx = RunContext(backend="mlflow", run_id="r", name="n", primary=True, tracking_dir=tmp_path)
    assert settings.tracking_uri(ctx) == f"sqlite:///{tmp_path.absolute()}/mlflow/mlflow.db"
    assert settings.experiment(ctx) == ("tracking-core", None)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://from-env:5000")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "env-exp")
    assert settings.tracking_uri(ctx) == "http://from-env:5000"
    assert settings.experiment(ctx) == ("env-exp", None)
    ctx.options = {"mlflow_tracking_uri": "sqlite:///rel/x.db", "mlflow_experiment": "opt"}
    assert settings.tracking_uri(ctx) == f"sqlite:///{Path('rel/x.db').absolute()}"
    assert settings.experiment(ctx) == ("opt", None)
    # Credentials never reach the handle; a secondary gets them back from its own environment.
    secret = "https://alice:s3cret@mlflow.example:8443/base"
    assert settings.public_uri(secret) == "https://mlflow.example:8443/base"
    ctx.options = {"mlflow_tracking_uri": secret}
    assert settings.attach_uri(ctx, "https://mlflow.example:8443/base") == secret
    assert settings.attach_uri(ctx, "http://other:1") == "http://other:1"
    assert settings.parse_tags("a=1, b = two") == {"a": "1", "b": "two"}
    assert settings.parse_tags('{"x": 3}') == {"x": "3"}
    with pytest.raises(ValueError, match="key=value"):
        settings.parse_tags("novalue")


def test_a_dead_server_fails_a_call_within_seconds(tmp_path: Path) -> None:
    """MLflow's defaults retry a dead server for ~4 minutes per call; the backend's must not."""
    from mlflow.exceptions import MlflowException
    from tracking_mlflow import settings
    from tracking_mlflow.backend import MlflowBackend

    uri = f"http://127.0.0.1:{free_port()}"
    ctx = RunContext(
        backend="mlflow", run_id="r", name="n", primary=True, tracking_dir=tmp_path,
        options={"mlflow_tracking_uri": uri},
    )
    start = time.monotonic()
    with pytest.raises(MlflowException):
        MlflowBackend(ctx).open_run(run=ctx, target=settings.target(ctx))
    assert time.monotonic() - start < 8.0


# -- a real mlflow server --------------------------------------------------------------------
LAUNCH = {
    "lr": 1e-6,
    "num_rollout": 3000,
    "rollout_function_path": "slime.rollout.sglang_rollout.generate_rollout",
    "prompt_data": "/data/dapo-math-17k.jsonl",
    "eval_config": {"aime": {"n_samples_per_eval_prompt": 16}},
    "pass@k": 8,
    "long_text": "x" * 7000,
    "wandb_key": "0123456789abcdef0123456789abcdef01234567",
}
ACTOR = {"lr": 1e-6, "tensor_model_parallel_size": 2, "micro_batch_size": 1}
CRITIC = {"lr": 1e-5, "tensor_model_parallel_size": 1, "micro_batch_size": 2}


@pytest.mark.slow
def test_server_round_trip(
    mlflow_server: MlflowServer, tmp_path: Path, caplog: pytest.LogCaptureFixture  # noqa: F811
) -> None:
    experiment = f"test-{uuid.uuid4().hex[:8]}"
    run = tracking_core.start_run(
        LAUNCH,
        backends=["mlflow"],
        tracking_dir=tmp_path,
        name="ppo-qwen3",
        options={
            "mlflow_tracking_uri": mlflow_server.uri,
            "mlflow_experiment": experiment,
            "mlflow_tags": "team=rl,sweep=s1",
        },
        tags={"launcher": "pytest"},
        export=False,
    )
    # start_run does not wait for MLflow: the handle holds the target until the run is open
    assert run.handle.backends["mlflow"] == {"tracking_uri": mlflow_server.uri, "experiment": experiment}
    actor = tracking_core.attach(run.handle, role="actor", writer=True, collect=False, config=ACTOR)
    critic = tracking_core.attach(
        run.handle, role="critic", writer=True, collect=False, config=CRITIC,
        metric_prefix="",  # slime names critic metrics itself
    )
    rollout = tracking_core.attach(
        run.handle, role="rollout", writer=True, collect=False, metric_prefix=""
    )
    steps = 60
    for step in range(steps):
        actor.log_metrics(
            {"train/pg_loss": 1.0 / (step + 1), "train/kl": 0.01 * step}, step=step,
            step_key="train/step",
        )
        critic.log_metrics(
            {"train/critic-value_loss": 2.0 - step / steps, "train/step": step}, step=step,
            step_key="train/step",
        )
        if step % 10 == 0:
            rollout.log_metrics(
                {"passrate/pass@1": step / 100, "rollout/step": step // 10}, step=step // 10,
                step_key="rollout/step",
            )
    run.log_metrics({"perf/wall": 1.5})
    run.log_metrics({"perf/wall": 2.5})
    # The same launch config again is fine; a changed value must not raise.
    run.log_config(LAUNCH, role=None)
    with caplog.at_level(logging.WARNING, logger="tracking_core.mlflow"):
        run.log_config({**LAUNCH, "num_rollout": 10}, role=None)
        assert run.flush(60)
    entry = run.handle.backends["mlflow"]  # the open's result, once it is open
    assert set(entry) == {"tracking_uri", "run_id", "experiment_id", "experiment"}
    assert entry["tracking_uri"] == mlflow_server.uri and entry["experiment"] == experiment
    for child in (actor, critic, rollout):
        summary = child.finish(60)
        assert summary.drained and not any(b["failures"] for b in summary.backends.values()), (
            summary.describe()
        )
    summary = run.finish(60)
    assert summary.drained, summary.describe()
    assert not summary.backends["mlflow"]["failures"], summary.describe()

    client = _client(entry)
    run_id = entry["run_id"]
    data = client.get_run(run_id)
    assert data.info.status == "FINISHED" and data.info.experiment_id == entry["experiment_id"]
    tags = data.data.tags
    assert tags["mlflow.runName"] == "ppo-qwen3" and tags["tracking_core.run_id"] == run.run_id
    assert tags["team"] == "rl" and tags["sweep"] == "s1" and tags["launcher"] == "pytest"
    # the writer registry: each writer once, by its label, with its role
    writers = {k: json.loads(v) for k, v in tags.items() if k.startswith("tracking_core.writer.")}
    assert sorted(w["role"] or "primary" for w in writers.values()) == ["actor", "critic", "primary", "rollout"], writers
    assert all(w["state"] == "complete" for w in writers.values()), writers

    # Config: params, lossless JSON artifacts, renamed/cut keys listed, the change recorded.
    _check_config(client, run_id, LAUNCH, None, latest={**LAUNCH, "num_rollout": 10})
    _check_config(client, run_id, ACTOR, "actor")
    _check_config(client, run_id, CRITIC, "critic")
    params = data.data.params
    assert params["num_rollout"] == "3000" and params["actor/lr"] == "1e-06"
    assert params["critic/tensor_model_parallel_size"] == "1"
    assert "0123456789abcdef" not in json.dumps(params)
    assert params[mlflow_key("pass@k")] == "8" and len(params["long_text"]) <= 6000
    keys = _artifact_json(client, run_id, "config/launch.mlflow-keys.json")
    assert keys == {"renamed": {"pass@k": mlflow_key("pass@k")}, "truncated": ["long_text"]}
    assert mlflow_key("pass@k").startswith("pass_at_k--")
    changed = json.loads(tags["config_changed/num_rollout"])
    assert changed["logged"] == "3000" and changed["new"] == "10"
    assert any("num_rollout" in r.getMessage() for r in caplog.records), caplog.text

    # Metrics: every step exactly once, named axes logged once per step.
    assert _history(client, run_id, "actor/train/pg_loss") == [
        (s, 1.0 / (s + 1)) for s in range(steps)
    ]
    assert len(client.get_metric_history(run_id, "actor/train/kl")) == steps
    # The step axes are the metrics' steps, not series of their own (nor the critic's own
    # train/step value, which is its step at every step).
    assert not {"actor/train/step", "train/step", "rollout/step"} & set(data.data.metrics)
    assert len(client.get_metric_history(run_id, "train/critic-value_loss")) == steps
    pass_at_1 = mlflow_key("passrate/pass@1")  # renamed: passrate/pass_at_1--<its hash>
    assert pass_at_1.startswith("passrate/pass_at_1--")
    assert _history(client, run_id, pass_at_1) == [(s, s / 10) for s in range(6)]
    assert tags[f"tracking_core.metric_key/{pass_at_1}"] == "passrate/pass@1"
    assert _history(client, run_id, "perf/wall") == [(0, 1.5), (0, 2.5)]


#: The histogram statistics MLflow gets as series (tracking_mlflow.media.SUMMARY_SERIES).
HISTOGRAM_SERIES = ("mean", "min", "max", "p5", "p50", "p95")


@pytest.mark.slow
def test_charts_hold_what_a_ppo_user_reads(
    mlflow_server: MlflowServer, tmp_path: Path  # noqa: F811
) -> None:
    """MLflow draws a chart for every metric key. A reward histogram gives the statistics a
    PPO user reads (mean, min, max, p5, p50, p95) at its step, not its count (a flat line) or
    every percentile; a step axis is its metrics' step, no series (and no chart) of its own. The
    rest stays data: the count and all percentiles in the step's histogram JSON."""
    import numpy as np

    run = tracking_core.start_run(
        backends=["mlflow"], tracking_dir=tmp_path, export=False,
        options={"mlflow_tracking_uri": mlflow_server.uri, "mlflow_experiment": f"charts-{tmp_path.name}"},
    )
    actor = tracking_core.attach(run.handle, role="actor", writer=True, collect=False)
    rng = np.random.default_rng(7)
    rewards = {step: rng.normal(step, 1.0 + step, size=64) for step in range(3)}
    for step, values in rewards.items():
        actor.log_metrics({"rollout/reward_mean": float(values.mean())}, step=step,
                          step_key="rollout/step")
        actor.log_histogram("rollout/reward", values, step=step, step_key="rollout/step")
        # a host that logs the axis beside the losses, as slime's own code does
        actor.log_metrics({"train/pg_loss": 1.0 / (step + 1), "train/step": step}, step=step,
                          step_key="train/step")
    run.log_metrics({"perf/wall": 2.5}, step=4, step_key="perf/step")
    run.log_metrics({"epoch": 0.5}, step=1, step_key="epoch")  # not its own step: a value, kept
    assert actor.finish(60).drained and run.finish(60).drained
    client = _client(run.handle.backends["mlflow"])
    run_id = run.handle.backends["mlflow"]["run_id"]

    keys = {k for k in client.get_run(run_id).data.metrics if not k.startswith("system/")}
    series = {f"actor/rollout/reward/{s}" for s in HISTOGRAM_SERIES}
    assert keys == {"actor/rollout/reward_mean", "actor/train/pg_loss", "perf/wall", "epoch", *series}
    for stat in HISTOGRAM_SERIES:
        want = {
            "mean": np.mean, "min": np.min, "max": np.max,
            "p5": lambda v: np.percentile(v, 5), "p50": np.median,
            "p95": lambda v: np.percentile(v, 95),
        }[stat]
        assert _history(client, run_id, f"actor/rollout/reward/{stat}") == [
            (step, pytest.approx(float(want(values)))) for step, values in rewards.items()
        ], stat
    assert _history(client, run_id, "actor/train/pg_loss") == [(s, 1.0 / (s + 1)) for s in range(3)]
    assert _history(client, run_id, "epoch") == [(1, 0.5)]
    doc = _artifact_json(client, run_id, "histograms/actor/rollout/reward/step-000002.json")
    assert doc["count"] == 64 and doc["step_key"] == "rollout/step"
    assert doc["summary"]["percentiles"]["p25"] == pytest.approx(float(np.percentile(rewards[2], 25)))


@pytest.mark.slow
@pytest.mark.parametrize("status", ["FAILED", "KILLED"])
def test_server_final_status(
    mlflow_server: MlflowServer, tmp_path: Path, status: str  # noqa: F811
) -> None:
    run = tracking_core.start_run(
        backends=["mlflow"], tracking_dir=tmp_path, export=False,
        options={"mlflow_tracking_uri": mlflow_server.uri, "mlflow_experiment": "statuses"},
    )
    child = tracking_core.attach(run.handle, role="actor", writer=True, collect=False)
    child.log_metrics({"loss": 1.0}, step=0)
    child.finish(30)
    assert run.finish(30, status=status).drained
    entry = run.handle.backends["mlflow"]
    info = _client(entry).get_run(entry["run_id"]).info
    assert info.status == status and info.end_time is not None


@pytest.mark.slow
def test_retried_batch_and_reopened_run_are_stored_once(
    mlflow_server: MlflowServer, tmp_path: Path  # noqa: F811
) -> None:
    """A batch offered again (the worker's retry after a lost reply, a journal replay) carries the
    same timestamps, and MLflow's SQL store keeps one copy; open_run again finds the same run."""
    from tracking_mlflow import settings
    from tracking_mlflow.backend import MlflowBackend

    ctx = RunContext(
        backend="mlflow", run_id=f"job-{uuid.uuid4().hex[:6]}", name="retry", primary=True,
        tracking_dir=tmp_path, options={"mlflow_tracking_uri": mlflow_server.uri},
    )
    target = settings.target(ctx)
    entry = MlflowBackend(ctx).open_run(run=ctx, target=target)
    again = MlflowBackend(ctx).open_run(run=ctx, target=target)
    assert again["run_id"] == entry["run_id"]
    secondary = RunContext(
        backend="mlflow", run_id=ctx.run_id, name="retry", primary=False, role="actor",
        tracking_dir=tmp_path,
    )
    now = time.time()
    records = [
        MetricRecord("loss", float(i), i, now + i / 1000, i, "actor", "actor/", "train/step")
        for i in range(300)
    ]
    for _ in range(2):  # a fresh process replaying the journal, then the same batch again
        backend = MlflowBackend(secondary)
        backend.attach_run(secondary, entry)
        backend.log_metrics(records[:200])
        backend.log_metrics(records[:200])
        backend.log_metrics(records[200:])
    client = _client(entry)
    assert _history(client, entry["run_id"], "actor/loss") == [(i, float(i)) for i in range(300)]
    assert "actor/train/step" not in client.get_run(entry["run_id"]).data.metrics  # the steps


# -- the embedded SQLite store, several writing processes -----------------------------------------
ROLE_WORKER = JOBS / "mlflow_role_worker.py"


@pytest.mark.slow
def test_embedded_store_with_concurrent_writers(tmp_path: Path) -> None:
    steps = 300
    run = tracking_core.start_run(
        {"lr": 1e-6, "model": "qwen3-4b"}, backends=["mlflow"], tracking_dir=tmp_path,
        name="embedded", export=False,
    )
    db = tmp_path / "mlflow" / "mlflow.db"
    # the writers start before the store exists: they find the job's run by its id
    assert run.handle.backends["mlflow"]["tracking_uri"] == f"sqlite:///{db.absolute()}"
    roles = {"actor": 1e-6, "critic": 1e-5, "rollout": 0.0}
    env = {"TRACKING_CORE_RUN": run.handle.to_json()}
    procs = {
        role: _python(ROLE_WORKER, env, [role, repr(lr), str(steps)])
        for role, lr in roles.items()
    }
    for step in range(steps):  # the primary writes at the same time
        run.log_metrics({"driver/queue": float(step)}, step=step, step_key="driver/step")
    for proc in procs.values():
        finish_python(proc, timeout=180)
    assert run.finish(60).drained
    entry = run.handle.backends["mlflow"]
    assert db.exists()

    client = _client(entry)
    run_id = entry["run_id"]
    info = client.get_run(run_id).info
    assert info.status == "FINISHED"
    # MLflow's UI opens it as a model-training experiment, not in its GenAI view
    assert client.get_experiment(info.experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"
    assert info.artifact_uri.startswith(str((tmp_path / "mlflow" / "artifacts").absolute())) or (
        str((tmp_path / "mlflow" / "artifacts").absolute()) in info.artifact_uri
    )
    _check_config(client, run_id, {"lr": 1e-6, "model": "qwen3-4b"}, None)
    for role, lr in roles.items():
        _check_config(client, run_id, {"lr": lr, "role_name": role, "seed": 1234}, role)
        assert _history(client, run_id, f"{role}/loss") == [
            (s, 1.0 / (s + 1)) for s in range(steps)
        ]
        assert len(client.get_metric_history(run_id, f"{role}/kl")) == steps
        assert len(client.get_metric_history(run_id, mlflow_key(f"{role}/passrate/pass@1"))) == steps
    assert len(client.get_metric_history(run_id, "driver/queue")) == steps
    # each metric's step is its axis: no axis series of its own
    assert not [k for k in client.get_run(run_id).data.metrics if k.endswith("/step")]


PRIMARY = JOBS / "mlflow_primary.py"


@pytest.mark.slow
def test_jobs_creating_one_embedded_store_at_once(tmp_path: Path) -> None:
    """Without the init lock, processes that create a fresh SQLite store at the same moment all
    run MLflow's migrations and leave a database that nobody can open."""
    procs = [
        _python(PRIMARY, args=[f"job{i}", str(tmp_path)])
        for i in range(3)
    ]
    outputs = [finish_python(p, timeout=180).stdout for p in procs]
    entries = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    assert len({e["run_id"] for e in entries}) == 3
    assert len({e["experiment_id"] for e in entries}) == 1
    client = _client(entries[0])
    for i, entry in enumerate(entries):
        data = client.get_run(entry["run_id"])
        assert data.info.status == "FINISHED" and data.data.params == {"job": f"job{i}"}
