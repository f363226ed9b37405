"""Each backend's target: where its run goes, decided at start without the tracker library.

The core computes every selected backend's target in the training process when a run starts
(``BackendSpec.resolve_target()``), keeps it in the run handle, and hands it back to the
primary's ``open_run(run, target)`` and, while the primary's open has not been reported yet, to
the secondaries' ``attach_run(run, attach=target)``. These tests call the hooks directly on
backend instances: the run is opened where the target says, whatever the environment of the
process that opens it; a secondary finds the job's run (MLflow: by its tag) and never creates
one; no target imports a tracker or carries a credential.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import tracking_core
from tests.helpers.mlflow_server import MlflowServer, mlflow_server  # noqa: F401
from tests.helpers.subprocess_python import JOBS, run_python
from tests.helpers.wandb_offline import W_VARS, offline_env
from tracking_core import MetricRecord, RunContext, RunStatus
from tracking_core.registry import Backend, BackendRegistrar

MLFLOW_VARS = (
    "MLFLOW_TRACKING_URI",
    "MLFLOW_EXPERIMENT_NAME",
    "MLFLOW_EXPERIMENT_ID",
    "MLFLOW_TRACKING_USERNAME",
    "MLFLOW_TRACKING_PASSWORD",
    "MLFLOW_TRACKING_TOKEN",
)
DROP = (*W_VARS, *MLFLOW_VARS, "TENSORBOARD_DIR")
BUILT_IN = ("jsonl", "mlflow", "tensorboard", "wandb")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in DROP:
        monkeypatch.delenv(name, raising=False)


def context(tmp_path: Path, backend: str, **kwargs: Any) -> RunContext:
    fields: dict[str, Any] = {
        "backend": backend,
        "run_id": f"job-{uuid.uuid4().hex[:8]}",
        "name": "ppo",
        "primary": True,
        "tracking_dir": tmp_path / "td",
    }
    fields.update(kwargs)
    return RunContext(**fields)


def secondary(ctx: RunContext, role: str = "actor") -> RunContext:
    return RunContext(
        backend=ctx.backend, run_id=ctx.run_id, name=ctx.name, primary=False, role=role,
        label=f"{role}-r0-p1", tracking_dir=ctx.tracking_dir,
    )


def target_of(name: str, run: RunContext) -> dict[str, Any]:
    """The target as the core computes it: through the spec the plugin registered."""
    target = tracking_core.get_plugin_manager().backends[name].resolve_target()
    assert target is not None, f"backend {name!r} declares no target"
    return dict(target(run))


# -- every target: cheap, plain, no credential ---------------------------------------------------
USER_SECRET = "s3cretPa55w0rd"
TOKEN = "mlflowtok-Z9y8X7w6V5u4T3s2"
API_KEY = "0123456789abcdef0123456789abcdef01234567"
SLIME_KEY = "fedcba9876543210fedcba9876543210fedcba98"
SECRETS = (USER_SECRET, TOKEN, API_KEY, SLIME_KEY, "alice:", "bob:")


def test_targets_import_no_tracker_and_carry_no_credential(tmp_path: Path) -> None:
    env = {
        "MLFLOW_TRACKING_URI": f"https://alice:{USER_SECRET}@mlflow.example:8443/base",
        "MLFLOW_TRACKING_USERNAME": "alice",
        "MLFLOW_TRACKING_PASSWORD": USER_SECRET,
        "MLFLOW_TRACKING_TOKEN": TOKEN,
        "WANDB_API_KEY": API_KEY,
        "WANDB_BASE_URL": f"https://bob:{USER_SECRET}@wandb.example",
        "WANDB_PROJECT": "tc",
    }
    result = run_python(
        JOBS / "targets.py", args=[tmp_path / "td", SLIME_KEY, *BUILT_IN], env=env, drop=DROP
    )
    text = result.stdout.strip().splitlines()[-1]
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} in a target: {text}"
    doc = json.loads(text)
    assert doc["heavy"] == [], "computing a target imported a tracker library"
    targets = doc["targets"]
    td = str((tmp_path / "td").absolute())
    assert targets["mlflow"] == {
        "tracking_uri": "https://mlflow.example:8443/base",
        "experiment": "tracking-core",
    }
    assert targets["jsonl"] == {"dir": f"{td}/jsonl/job-1"}
    assert targets["tensorboard"] == {"logdir": f"{td}/tensorboard/ppo"}
    wandb = targets["wandb"]
    assert {k: wandb[k] for k in ("id", "project", "entity", "name", "mode", "dir")} == {
        "id": "job-1", "project": "tc", "entity": None, "name": "ppo", "mode": "online", "dir": td,
    }
    assert wandb["group"] == "g"


def test_target_declared_as_string_or_callable() -> None:
    register = BackendRegistrar(plugin="test")

    def where(run: RunContext) -> dict[str, str]:
        return {"dir": "/somewhere"}

    register(Backend("plain", "tracking_jsonl.backend:JsonlBackend"))
    register(Backend("called", "tracking_jsonl.backend:JsonlBackend", target=where))
    register(Backend("named", "tracking_jsonl.backend:JsonlBackend", target="tracking_jsonl.backend:target"))
    assert register.specs["plain"].resolve_target() is None
    assert register.specs["called"].resolve_target() is where
    from tracking_jsonl.backend import target

    assert register.specs["named"].resolve_target() is target


def test_mlflow_target_by_experiment_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracking_mlflow import settings

    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", "7")
    ctx = context(tmp_path, "mlflow", options={"mlflow_tracking_uri": "http://h:5000"})
    assert target_of("mlflow", ctx) == {"tracking_uri": "http://h:5000", "experiment_id": "7"}
    assert settings.target_experiment({"experiment_id": "7", "experiment": "x"}) == (None, "7")
    assert settings.target_experiment({"experiment": "x"}) == ("x", None)


# -- MLflow: the run goes where the target says ------------------------------------------------
@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("later", ["unset", "elsewhere"])
def test_mlflow_open_run_uses_the_target_not_the_environment(
    mlflow_server: MlflowServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    later: str,
) -> None:
    """The job had MLFLOW_TRACKING_URI; the process that opens the run (a delivery process, or
    ``tracking-core sync`` from another shell) has none, or another one: the run still goes to
    the job's store, never to the embedded SQLite store nor to the other one."""
    from mlflow import MlflowClient
    from tracking_mlflow.backend import RUN_ID_TAG, MlflowBackend

    experiment = f"target-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", experiment)
    ctx = context(tmp_path, "mlflow")
    target = target_of("mlflow", ctx)
    assert target == {"tracking_uri": mlflow_server.uri, "experiment": experiment}

    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME")
    elsewhere = tmp_path / "elsewhere.db"
    if later == "unset":
        monkeypatch.delenv("MLFLOW_TRACKING_URI")
    else:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{elsewhere}")
    backend = MlflowBackend(ctx)
    entry = backend.open_run(run=ctx, target=target)
    assert entry["tracking_uri"] == mlflow_server.uri and entry["experiment"] == experiment
    assert set(entry) == {"tracking_uri", "run_id", "experiment_id", "experiment"}
    backend.close_run(status=RunStatus.FINISHED, run=ctx)

    client = MlflowClient(mlflow_server.uri)
    found = client.get_run(entry["run_id"])
    assert found.data.tags[RUN_ID_TAG] == ctx.run_id
    assert found.info.experiment_id == entry["experiment_id"]
    assert not (ctx.tracking_dir / "mlflow").exists(), "an embedded store was created"
    assert not elsewhere.exists(), "the run went where this process's environment points"


@pytest.mark.slow
@pytest.mark.integration
def test_mlflow_secondary_with_only_the_target_finds_the_run_by_tag(
    mlflow_server: MlflowServer, tmp_path: Path  # noqa: F811
) -> None:
    from mlflow import MlflowClient
    from tracking_mlflow.backend import RUN_ID_TAG, MlflowBackend

    experiment = f"by-tag-{uuid.uuid4().hex[:8]}"
    options = {"mlflow_tracking_uri": mlflow_server.uri, "mlflow_experiment": experiment}
    ctx = context(tmp_path, "mlflow", options=options)
    target = target_of("mlflow", ctx)
    actor = secondary(ctx)
    client = MlflowClient(mlflow_server.uri)

    # Before the primary opened: not even the experiment exists; the secondary creates nothing.
    with pytest.raises(RuntimeError, match="not open yet"):
        MlflowBackend(actor).attach_run(run=actor, attach=target)
    assert client.get_experiment_by_name(experiment) is None

    # Another job of the same experiment is open: still not this job's run.
    other = context(tmp_path, "mlflow", options=options)
    MlflowBackend(other).open_run(run=other, target=target_of("mlflow", other))
    with pytest.raises(RuntimeError, match="not open yet"):
        MlflowBackend(actor).attach_run(run=actor, attach=target)

    primary = MlflowBackend(ctx)
    entry = primary.open_run(run=ctx, target=target)
    backend = MlflowBackend(actor)
    attached = backend.attach_run(run=actor, attach=target)
    assert attached is not None and attached["run_id"] == entry["run_id"]
    assert attached["experiment_id"] == entry["experiment_id"]
    now = time.time()
    backend.log_metrics(
        records=[MetricRecord("loss", 0.5, 3, now, 1, "actor", "actor/", None)]
    )
    backend.close_run(status=RunStatus.FINISHED, run=actor)
    primary.close_run(status=RunStatus.FINISHED, run=ctx)

    run = client.get_run(entry["run_id"])
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "actor/loss")] == [
        (3, 0.5)
    ]
    ours = client.search_runs(
        [entry["experiment_id"]], filter_string=f"tags.`{RUN_ID_TAG}` = '{ctx.run_id}'"
    )
    assert len(ours) == 1, "a second run was created for the job"

    # A primary resuming with only the target opens the same run again (RUNNING), no new one.
    resumed_ctx = RunContext(
        backend="mlflow", run_id=ctx.run_id, name=ctx.name, primary=True, resume=True,
        tracking_dir=ctx.tracking_dir,
    )
    resumed = MlflowBackend(resumed_ctx).attach_run(run=resumed_ctx, attach=target)
    assert resumed is not None and resumed["run_id"] == entry["run_id"]
    assert client.get_run(entry["run_id"]).info.status == "RUNNING"
    ours = client.search_runs(
        [entry["experiment_id"]], filter_string=f"tags.`{RUN_ID_TAG}` = '{ctx.run_id}'"
    )
    assert len(ours) == 1


# -- W&B, TensorBoard, jsonl ---------------------------------------------------------------------
@pytest.mark.integration
def test_wandb_open_and_attach_use_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    from tracking_wandb.backend import WandbBackend

    for name, value in offline_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WANDB_PROJECT", "tc-target")
    ctx = context(tmp_path, "wandb", options={"wandb_group": "g", "wandb_random_suffix": True})
    target = target_of("wandb", ctx)
    assert target["id"] == ctx.run_id and target["project"] == "tc-target"
    assert target["group"].startswith("g_") and target["mode"] == "offline"
    job_root = Path(target["dir"])

    # The opening process has another W&B directory and project: the target's win.
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("WANDB_PROJECT", "other")
    primary = WandbBackend(ctx)
    entry = primary.open_run(run=ctx, target=target)
    assert {k: entry[k] for k in target} == target  # the group's suffix was drawn once
    actor = secondary(ctx)
    backend = WandbBackend(actor)
    attached = backend.attach_run(run=actor, attach=target)
    assert attached["id"] == ctx.run_id and attached["dir"] == str(job_root)
    backend.close_run(status=RunStatus.FINISHED, run=actor)
    primary.close_run(status=RunStatus.FINISHED, run=ctx)
    # In one process the role writes through the primary's run: one offline run directory.
    runs = sorted(p.name for p in (job_root / "wandb").glob(f"offline-run-*-{ctx.run_id}*"))
    assert len(runs) == 1, runs
    assert not (tmp_path / "elsewhere" / "wandb").exists()


@pytest.mark.integration
def test_tensorboard_log_dir_is_decided_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tensorboardX")
    from tracking_tensorboardx.backend import TensorBoardBackend

    ctx = context(tmp_path, "tensorboard")
    target = target_of("tensorboard", ctx)
    logdir = Path(target["logdir"])
    assert logdir == (tmp_path / "td" / "tensorboard" / "ppo").absolute()

    record = MetricRecord("loss", 1.0, 0, time.time(), 0, None, "", None)
    first = TensorBoardBackend(ctx)
    assert first.open_run(run=ctx, target=target) == target
    first.log_metrics(records=[record])
    first.close_run(status=RunStatus.FINISHED)
    # The run's own events are there now: an open again (a restarted delivery process) and a
    # secondary holding only the target stay in the run's directory.
    again = TensorBoardBackend(ctx)
    assert again.open_run(run=ctx, target=target) == target
    again.close_run(status=RunStatus.FINISHED)
    actor = secondary(ctx)
    assert TensorBoardBackend(actor).attach_run(run=actor, attach=target) == target

    # Another job with the same name moves aside, decided when its target is computed.
    other = context(tmp_path, "tensorboard")
    assert target_of("tensorboard", other) == {"logdir": f"{logdir}-{other.run_id}"}

    # $TENSORBOARD_DIR at start is where the run goes, even once the variable is gone.
    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "from-env"))
    env_ctx = context(tmp_path, "tensorboard")
    env_target = target_of("tensorboard", env_ctx)
    monkeypatch.delenv("TENSORBOARD_DIR")
    backend = TensorBoardBackend(env_ctx)
    assert backend.open_run(run=env_ctx, target=env_target) == {
        "logdir": str(tmp_path / "from-env")
    }
    backend.close_run(status=RunStatus.FINISHED)


def test_jsonl_open_and_attach_use_the_target(tmp_path: Path) -> None:
    from tracking_jsonl.backend import JsonlBackend

    ctx = context(tmp_path, "jsonl")
    target = target_of("jsonl", ctx)
    assert target == {"dir": str((tmp_path / "td" / "jsonl" / ctx.run_id).absolute())}
    moved = {"dir": str(tmp_path / "job-store")}  # e.g. sync with another --tracking-dir
    primary = JsonlBackend(ctx)
    assert primary.open_run(run=ctx, target=moved) == moved
    actor = secondary(ctx)
    backend = JsonlBackend(actor)
    backend.attach_run(run=actor, attach=moved)
    backend.close_run(status=RunStatus.FINISHED, run=actor)
    primary.close_run(status=RunStatus.FINISHED, run=ctx)
    store = Path(moved["dir"])
    assert sorted(p.name for p in store.iterdir()) == ["actor.jsonl", "primary.jsonl", "run.json"]
    assert not (tmp_path / "td").exists()
