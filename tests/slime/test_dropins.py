"""The slime drop-ins (init_tracking / log / finish_tracking) against real trackers.

A slime PPO job is replayed in this process the way slime runs it: the driver's ``init_tracking``
on the launch args recorded from slime's real parser (tests/fixtures/slime_ppo_args.json), the
rollout manager and the actor and critic attaching with copies of those args made after it (the
critic's and actor's resolved from tests/fixtures/slime_megatron_roles.yaml, as slime's
``create_training_models`` does), metrics named as slime names them, and a W&B key planted in the
args and on the command line. What the trackers hold is read back with each tracker's own reader.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import re
import secrets
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tracking_jsonl.reader import read_run

import tracking_core
from slime_integration import collectors, options, tracking
from slime_integration.fixture_args import load_fixture_namespaces
from slime_integration.role_args import resolve_role_args
from tests.helpers.mlflow_server import mlflow_server  # noqa: F401 - session fixture
from tracking_core.handle import ARGS_ATTR, RUN_ENV, RunHandle
from tracking_core.options import tracking_option_dests
from tracking_core.selection import resolve_backend_names

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ARGS_JSON = FIXTURES / "slime_ppo_args.json"
ROLES_YAML = FIXTURES / "slime_megatron_roles.yaml"
STEPS = 3
ALL_BACKENDS = ("jsonl", "mlflow", "wandb", "tensorboard")
#: What slime forces on the critic (and the actor keeps from the launch).
CRITIC_FORCED = {
    "kl_coef": (0, 0.0),
    "use_opd": (False, False),
    "custom_advantage_function_path": (None, None),
    "untie_embeddings_and_output_weights": (True, False),
    "disable_param_buffers_cpu_backup": (False, True),
}
#: Variables that would steer a run from outside the test.
ISOLATED_ENV = (
    RUN_ENV,
    "TRACKING_CORE_BACKENDS",
    "TRACKING_CORE_DIR",
    "TRACKING_CORE_KEY_STYLE",
    "TRACKING_CORE_WRITER",
    "WANDB_API_KEY",
    "WANDB_MODE",
    "WANDB_DIR",
    "WANDB_SERVICE",
    "MLFLOW_TRACKING_URI",
    "TENSORBOARD_DIR",
)


def slime_args(tmp: Path, **overrides: Any) -> argparse.Namespace:
    """The launch namespace slime's parser produced, pointed at the test's files."""
    base = load_fixture_namespaces(ARGS_JSON, ("base",))["base"]
    base.megatron_config_path = str(ROLES_YAML)
    base.tracking_dir = str(tmp)
    base.tracking_backends = "jsonl"
    base.tracking_key_style = None
    for key, value in overrides.items():
        setattr(base, key, value)
    return base


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No run handle, backend choice or key from the outside; nothing left behind."""
    for name in ISOLATED_ENV:
        monkeypatch.delenv(name, raising=False)
    yield
    tracking.reset()
    tracking.unregister_plugins()


def available(names: tuple[str, ...]) -> list[str]:
    """The backends of ``names`` this installation offers, with their libraries installed."""
    specs = tracking_core.get_plugin_manager().backends
    return [n for n in names if n in specs and not specs[n].missing()]


# -- the job -------------------------------------------------------------------------------------
@dataclass
class Job:
    handle: RunHandle
    roots: list[Path]
    key: str
    api_key_seen: str | None
    roles: dict[str, argparse.Namespace] = field(default_factory=dict)


def run_slime_job(base: argparse.Namespace, steps: int = STEPS) -> tuple[RunHandle, dict[str, Any]]:
    """slime's calls, in slime's order, in one process (each role with its own args object)."""
    tracking.init_tracking(base)
    handle = RunHandle.parse(getattr(base, ARGS_ATTR))
    # slime copies args for the actors after init_tracking: the handle travels with them.
    roles: dict[str, Any] = dict(resolve_role_args(base, base.megatron_config_path, prefer_slime=False))
    roles["rollout"] = copy.deepcopy(base)
    tracking.init_tracking(roles["rollout"], primary=False)
    tracking.init_tracking(roles["actor"], primary=False, role="actor")
    tracking.init_tracking(roles["critic"], primary=False, role="critic")
    for step in range(steps):
        tracking.log(
            roles["rollout"],
            {"rollout/raw_reward": 0.5 + step, "rollout/response_len": 100.0 * step, "rollout/step": step},
            step_key="rollout/step",
        )
        tracking.log(
            roles["actor"],
            {"train/pg_loss": 0.1 * step, "train/grad_norm": 1.0 + step, "train/step": step},
            step_key="train/step",
        )
        tracking.log(
            roles["critic"],
            {"train/critic-value_loss": 0.2 * step, "train/step": step},
            step_key="train/step",
        )
    # What every tracker holds is the point here, not how long the driver's bounded wait for
    # its peers lasts (tracking_core.delivery.sync.await_peers, tested with the Ray topology):
    # on a busy machine, let each role deliver first.
    for role in ("actor", "critic", "rollout"):
        run = tracking.current_run(roles[role])
        assert run is not None and run.flush(timeout=180), role
    tracking.finish_tracking(roles["rollout"])  # the rollout manager's dispose()
    tracking.finish_tracking(base)  # the driver, at the end of train()
    tracking.reset()  # the training actors never call finish_tracking: their processes end
    # the saved handle: it holds each backend's open result (the one on args, its targets)
    return RunHandle.parse(handle.run_dir), roles


EXPECTED_METRICS = {
    "rollout/raw_reward": [(s, 0.5 + s) for s in range(STEPS)],
    "rollout/response_len": [(s, 100.0 * s) for s in range(STEPS)],
    "train/pg_loss": [(s, 0.1 * s) for s in range(STEPS)],
    "train/grad_norm": [(s, 1.0 + s) for s in range(STEPS)],
    "train/critic-value_loss": [(s, 0.2 * s) for s in range(STEPS)],
}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Job]:
    """One slime job logged to every available backend (MLflow on a real server, W&B offline)."""
    backends = available(ALL_BACKENDS)
    tmp = tmp_path_factory.mktemp("slime-job")
    key = secrets.token_hex(20)  # a W&B API key is 40 hex digits
    roots = [tmp]
    with pytest.MonkeyPatch.context() as mp:
        for name in ISOLATED_ENV:
            mp.delenv(name, raising=False)
        if "mlflow" in backends:
            server = request.getfixturevalue("mlflow_server")
            mp.setenv("MLFLOW_TRACKING_URI", server.uri)
            roots.append(Path(server.root))
        mp.setattr(sys, "argv", ["train.py", "--use-wandb", "--wandb-key", key, "--lr", "1e-6"])
        base = slime_args(tmp, tracking_backends=",".join(backends), wandb_key=key, wandb_mode="offline")
        try:
            handle, roles = run_slime_job(base)
            seen = os.environ.get("WANDB_API_KEY")
        finally:
            tracking.reset()
            tracking.unregister_plugins()
    yield Job(handle, roots, key, seen, roles)


# -- reading back --------------------------------------------------------------------------------
@dataclass
class Readback:
    params: dict[str, Any]
    metrics: dict[str, list[tuple[int, float]]]


def _json_or_text(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def read_jsonl(handle: RunHandle) -> Readback:
    run = read_run(Path(handle.backends["jsonl"]["dir"]))
    params: dict[str, Any] = {}
    for section in run.configs.values():
        params.update(section["params"])
    metrics: dict[str, list[tuple[int, float]]] = {}
    for m in sorted(run.metrics, key=lambda m: (m["name"], m["step"])):
        metrics.setdefault(m["name"], []).append((m["step"], m["value"]))
    return Readback(params, metrics)


def read_mlflow(handle: RunHandle) -> Readback:
    from mlflow import MlflowClient

    entry = handle.backends["mlflow"]
    client = MlflowClient(entry["tracking_uri"])
    run = client.get_run(entry["run_id"])
    params = {key: _json_or_text(value) for key, value in run.data.params.items()}
    metrics = {
        key: sorted((m.step, m.value) for m in client.get_metric_history(entry["run_id"], key))
        for key in run.data.metrics
    }
    return Readback(params, metrics)


def read_wandb(handle: RunHandle) -> Readback:
    from tests.helpers.wandb_offline import merged_config, read_job

    runs = read_job(Path(handle.backends["wandb"]["dir"]) / "wandb", handle.backends["wandb"]["id"])
    assert runs, "no W&B offline run directory for the job"
    metrics: dict[str, list[tuple[int, float]]] = {}
    for run in runs:
        axes = {name: d.get("step_metric") for name, d in run.metric_definitions.items()}
        for row in run.history:
            for key, value in row.items():
                if key.startswith("_") or axes.get(key) is None:
                    continue  # W&B's own columns, and the step axes themselves
                metrics.setdefault(key, []).append((int(row[axes[key]]), float(value)))
    return Readback(merged_config(runs), {k: sorted(v) for k, v in metrics.items()})


_TB_ROW = re.compile(r"^\| `(?P<key>[^`]+)` \| `(?P<value>.*)` \|$")


def read_tensorboard(handle: RunHandle) -> Readback:
    """Every role's config: its text table (hparams take scalars only, so None is only there),
    then its HParams values on top. A role's HParams keys are unprefixed (the TensorBoard run is
    the role, and one column compares the roles): the run's name gives the prefix back."""
    from tests.helpers.tb_events import read_logdir

    params: dict[str, Any] = {}
    metrics: dict[str, list[tuple[int, float]]] = {}
    for name, run in read_logdir(handle.backends["tensorboard"]["logdir"]).items():
        for texts in run.text.values():
            for line in texts[-1].splitlines():
                m = _TB_ROW.match(line)
                if m:
                    params[m["key"]] = _json_or_text(m["value"].replace("\\|", "|"))
        prefix = "" if name == "launch" else f"{name}/"
        # the scalars, as the HParams dashboard shows them
        params.update({prefix + key: value for key, value in run.hparams.items()})
        for tag, points in run.scalars.items():
            metrics.setdefault(tag, []).extend((int(s), v) for s, v in points)
    return Readback(params, {k: sorted(v) for k, v in metrics.items()})


READERS = {"jsonl": read_jsonl, "mlflow": read_mlflow, "wandb": read_wandb, "tensorboard": read_tensorboard}


@pytest.fixture(scope="module")
def readbacks() -> dict[str, Readback]:
    """Each backend read once per module (W&B's reader starts a process per run file)."""
    return {}


@pytest.fixture(params=ALL_BACKENDS)
def readback(request: pytest.FixtureRequest, job: Job, readbacks: dict[str, Readback]) -> tuple[str, Readback]:
    name = request.param
    if name not in job.handle.backends:
        pytest.skip(f"backend {name!r} is not installed here")
    if name not in readbacks:
        readbacks[name] = READERS[name](job.handle)
    return name, readbacks[name]


# -- done-when: configs per the key convention, in every tracker -----------------------------------
@pytest.mark.slow
@pytest.mark.integration
def test_launch_config_unprefixed_role_configs_prefixed(readback: tuple[str, Readback], job: Job) -> None:
    name, data = readback
    params = data.params
    launch = load_fixture_namespaces(ARGS_JSON, ("base",))["base"]
    assert params["lr"] == pytest.approx(1e-6), name
    assert params["actor/lr"] == pytest.approx(1e-6), name
    assert params["critic/lr"] == pytest.approx(1e-5), name
    assert params["megatron_config_path"] == str(ROLES_YAML), name
    assert params["use_critic"] is True and params["critic/use_critic"] is True, name
    for key, (critic_value, actor_value) in CRITIC_FORCED.items():
        for role, value in (("critic", critic_value), ("actor", actor_value)):
            if value is None and name != "tensorboard":  # a null value is no param
                assert f"{role}/{key}" not in params, (name, role, key)
            else:
                assert params[f"{role}/{key}"] == value, (name, role, key)
    # Every launch key with a value is a parameter, the tracking options (tracking-core's, the
    # trackers', the adapter's) under tracking/ only; no null value is one (config/launch.json
    # keeps them all). W&B drops a config value that is an empty mapping (slime's
    # train_env_vars={}, ...); those keys live in the run's config/launch.json file instead.
    tracking = tracking_option_dests()
    skip = {k for k, v in vars(launch).items() if v == {}} if name == "wandb" else set()
    missing = [
        k for k, v in vars(launch).items()
        if v is not None and k not in params and k not in skip and f"tracking/{k}" not in params
    ]  # fmt: skip
    assert not missing, f"{name}: launch keys missing: {missing[:10]}"
    assert {"tracking/tracking_backends", "tracking/tracking_dir"} <= set(params), name
    if name != "tensorboard":  # (its reader adds the config text, which shows every key)
        leaks = [k for k in params if not k.startswith("tracking/") and k.rsplit("/", 1)[-1] in tracking]
        assert not leaks, f"{name}: tracking options among the job's params: {leaks[:10]}"
        # (slime's sglang_* defaults are the text "null", which MLflow's text reads back as null)
        nulls = [k for k, v in params.items() if v is None and getattr(launch, k.rsplit("/", 1)[-1], None) != "null"]
        assert not nulls, f"{name}: null params: {nulls[:10]}"
    for role in ("actor", "critic", "rollout"):
        assert f"{role}/{ARGS_ATTR}" not in params and ARGS_ATTR not in params, name
        assert params[f"{role}/parallel/host"], (name, role)
    assert params["actor/parallel/num_gpus_per_node"] == 8
    assert params["rollout/parallel/num_gpus_per_engine"] == 2


@pytest.mark.slow
@pytest.mark.integration
def test_metrics_as_slime_named_them_exactly_once(readback: tuple[str, Readback]) -> None:
    name, data = readback
    for metric, points in EXPECTED_METRICS.items():
        got = data.metrics.get(metric)
        assert got is not None, f"{name}: {metric} missing; has {sorted(data.metrics)}"
        assert [s for s, _ in got] == [s for s, _ in points], (name, metric, got)
        assert [v for _, v in got] == pytest.approx([v for _, v in points], rel=1e-6), (name, metric)
    prefixed = [m for m in data.metrics if m.startswith(("actor/", "critic/", "rollout/rollout"))]
    assert not prefixed, f"{name}: role prefix added to slime's names: {prefixed}"


@pytest.mark.slow
@pytest.mark.integration
def test_tensorboard_hparams_compare_the_roles_in_one_column(job: Job) -> None:
    """slime's actor and critic (lr from slime_megatron_roles.yaml) side by side under ``lr``."""
    if "tensorboard" not in job.handle.backends:
        pytest.skip("tensorboard is not installed here")
    from tests.helpers.tb_events import hparams_dashboard, read_logdir

    logdir = job.handle.backends["tensorboard"]["logdir"]
    runs = read_logdir(logdir)
    lrs = {role: runs[role].hparams["lr"] for role in ("launch", "actor", "critic", "rollout")}
    assert lrs == pytest.approx({"launch": 1e-6, "actor": 1e-6, "critic": 1e-5, "rollout": 1e-6})
    assert runs["critic"].hparams["kl_coef"] == 0 and runs["actor"].hparams["kl_coef"] == 0
    assert runs["critic"].hparams["untie_embeddings_and_output_weights"] is True
    columns = hparams_dashboard(logdir).hparams
    assert "lr" in columns and not [c for c in columns if c.startswith(("actor/", "critic/"))]


@pytest.mark.slow
@pytest.mark.integration
def test_wandb_key_logs_in_and_is_never_logged(job: Job) -> None:
    from tests.helpers.wandb_offline import grep_files

    assert job.api_key_seen == job.key  # exported for W&B to log in with
    for root in job.roots:
        leaked = grep_files(root, job.key)
        assert not leaked, f"the planted wandb_key is in {leaked}"


def test_step_key_is_the_step_not_a_metric(tmp_path: Path) -> None:
    base = slime_args(tmp_path)
    tracking.init_tracking(base)
    actor = copy.deepcopy(base)
    tracking.init_tracking(actor, primary=False, role="actor")
    np = pytest.importorskip("numpy")
    tracking.log(actor, {"train/pg_loss": 0.5, "train/step": np.int64(7)}, "train/step")
    tracking.log(actor, {"train/pg_loss": 0.25, "train/step": 8.0}, "train/step")
    tracking.log(actor, {"perf/step_time": 1.5, "rollout/step": 2}, "rollout/step")
    tracking.reset()
    records = read_run(Path(RunHandle.parse(base.tracking_run).backends["jsonl"]["dir"])).metrics
    got = sorted((m["name"], m["step"], m["step_key"], m["value"]) for m in records)
    assert got == [
        ("perf/step_time", 2, "rollout/step", 1.5),
        ("train/pg_loss", 7, "train/step", 0.5),
        ("train/pg_loss", 8, "train/step", 0.25),
    ]


def test_slimes_timers_are_phases_of_the_trace_and_nothing_is_reduced_again(tmp_path: Path) -> None:
    """slime's ``perf/<phase>_time`` values are logged as slime named them, and each is a span of
    the role's phase trace ending at the call (a NaN, negative or infinite time is no span); no
    ``perf/<phase>/*`` series is added."""
    base = slime_args(tmp_path)
    tracking.init_tracking(base)
    rollout = copy.deepcopy(base)
    tracking.init_tracking(rollout, primary=False)
    for step in range(2):
        tracking.log(rollout, {"perf/rollout_time": 2.0 + step, "perf/update_weights_time": 0.5,
                               "perf/tokens_per_gpu_per_sec": 9.0, "rollout/step": step,
                               "perf/nan_time": float("nan"), "perf/negative_time": -1.0,
                               "perf/inf_time": float("inf")}, "rollout/step")  # fmt: skip
    run_dir = tracking.current_run(rollout).handle.run_dir
    tracking.finish_tracking(rollout)
    tracking.reset()
    trace = json.loads((run_dir / "trace-rollout.json").read_text())
    spans = sorted((e["name"], e["args"]["step"], e["dur"]) for e in trace["traceEvents"] if e["ph"] == "X")
    assert spans == [("rollout", 0, 2e6), ("rollout", 1, 3e6), ("update_weights", 0, 5e5), ("update_weights", 1, 5e5)]
    records = read_run(Path(RunHandle.parse(base.tracking_run).backends["jsonl"]["dir"])).metrics
    assert Counter(m["name"] for m in records) == {
        "perf/rollout_time": 2, "perf/update_weights_time": 2, "perf/tokens_per_gpu_per_sec": 2,
        "perf/nan_time": 2, "perf/negative_time": 2, "perf/inf_time": 2,
    }  # fmt: skip  # a time that is no duration is logged as slime made it, never a span


def test_slime_key_style_reproduces_slimes_config_keys(tmp_path: Path) -> None:
    base = slime_args(tmp_path, tracking_key_style="slime")
    handle, roles = run_slime_job(base, steps=1)
    run = read_run(Path(handle.backends["jsonl"]["dir"]))
    assert run.configs["launch"]["params"] == {}  # only in its JSON artifact: the actor owns these
    assert run.configs["launch"]["values"]["lr"] == pytest.approx(1e-6)
    params: Counter[str] = Counter()
    for section in run.configs.values():
        params.update(list(section["params"]))
    assert all(n == 1 for n in params.values()), "a key written by two roles"
    actor, critic = run.configs["actor"]["params"], run.configs["critic"]["params"]
    # slime's own keys: the args unprefixed, the critic's args under critic/; those that hold the
    # job: no null value and no tracking option (both stay in the roles' JSON artifacts)
    tracking = tracking_option_dests()

    def job_keys(ns: argparse.Namespace) -> set[str]:
        return {k for k, v in vars(ns).items() if v is not None and k not in tracking}

    slime_keys = job_keys(roles["actor"]) | {f"critic/{k}" for k in job_keys(roles["critic"])}
    slime_keys -= {ARGS_ATTR, f"critic/{ARGS_ATTR}"}
    ours = set(actor) | set(critic)
    assert slime_keys <= ours, sorted(slime_keys - ours)[:10]
    assert not {k.removeprefix("critic/") for k in ours} & tracking
    extra = {k.removeprefix("critic/") for k in ours - slime_keys}
    assert all(k.split("/")[0] in {"parallel", "env", "git", "version"} for k in extra), extra
    assert actor["lr"] == pytest.approx(1e-6) and critic["critic/lr"] == pytest.approx(1e-5)
    assert critic["critic/kl_coef"] == 0 and critic["critic/untie_embeddings_and_output_weights"] is True
    assert all(k.startswith("rollout/") for k in run.configs["rollout"]["params"])


# -- lifecycle -----------------------------------------------------------------------------------------
def test_secondary_finish_detaches_and_leaves_the_run_open(tmp_path: Path) -> None:
    base = slime_args(tmp_path)
    tracking.init_tracking(base)
    rollout = copy.deepcopy(base)
    assert tracking.init_tracking(rollout, primary=False) is tracking.current_run(rollout)
    assert tracking.current_run(rollout).role == "rollout"
    tracking.log(rollout, {"rollout/raw_reward": 1.0, "rollout/step": 0}, "rollout/step")
    tracking.finish_tracking(rollout)
    assert tracking.current_run(rollout) is tracking.current_run(base)  # only the primary is left
    primary = tracking.current_run(base)
    assert primary is not None and primary.finished is None
    tracking.log(base, {"perf/total": 2.0, "rollout/step": 1}, "rollout/step")
    tracking.finish_tracking(base)
    assert primary.finished is not None
    run = read_run(Path(primary.handle.backends["jsonl"]["dir"]))
    assert run.status == "FINISHED"
    assert Counter(m["name"] for m in run.metrics) == {"rollout/raw_reward": 1, "perf/total": 1}
    tracking.finish_tracking(base)  # again: nothing to do, no error


def test_init_is_idempotent_and_roles_are_found_by_their_args(tmp_path: Path) -> None:
    base = slime_args(tmp_path)
    primary = tracking.init_tracking(base)
    assert tracking.init_tracking(base) is primary
    actor, critic = copy.deepcopy(base), copy.deepcopy(base)
    a = tracking.init_tracking(actor, primary=False, role="actor")
    c = tracking.init_tracking(critic, primary=False, role="critic")
    assert tracking.init_tracking(actor, primary=False, role="actor") is a
    assert (tracking.current_run(actor), tracking.current_run(critic)) == (a, c)
    assert tracking.current_run(copy.deepcopy(base)) is None  # several runs here: no guessing
    assert a.role == "actor" and a.metric_prefix == ""


def test_non_writer_rank_is_a_no_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = slime_args(tmp_path)
    tracking.init_tracking(base)
    monkeypatch.setenv("TRACKING_CORE_WRITER", "0")
    other = copy.deepcopy(base)
    run = tracking.init_tracking(other, primary=False, role="actor")
    assert run is not None and not run.is_writer
    tracking.log(other, {"train/pg_loss": 1.0, "train/step": 0}, "train/step")
    tracking.finish_tracking(other)
    tracking.finish_tracking(base)
    jsonl = Path(RunHandle.parse(base.tracking_run).backends["jsonl"]["dir"])
    assert sorted(p.name for p in jsonl.glob("*.jsonl")) == ["primary.jsonl"]


def test_secondary_without_a_run_warns_and_logs_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    args = slime_args(tmp_path)
    with caplog.at_level(logging.WARNING, logger="tracking_core.slime"):
        assert tracking.init_tracking(args, primary=False, role="critic") is None
        tracking.log(args, {"train/critic-value_loss": 1.0, "train/step": 0}, "train/step")
        tracking.finish_tracking(args)
    assert "no run to attach to" in caplog.text
    assert not (tmp_path / "jsonl").exists()


def test_log_never_raises(tmp_path: Path) -> None:
    base = slime_args(tmp_path)
    tracking.init_tracking(base)
    tracking.log(base, {"train/x": object(), "train/step": "not a step"}, "train/step")
    tracking.log(base, {"train/x": 1.0}, "train/step")  # no step in the metrics
    tracking.log(base, None, "train/step")  # type: ignore[arg-type]


def test_wandb_run_id_resumes_the_saved_run(tmp_path: Path) -> None:
    first = slime_args(tmp_path)
    tracking.init_tracking(first)
    tracking.log(first, {"perf/x": 1.0, "rollout/step": 0}, "rollout/step")
    tracking.finish_tracking(first)
    run_id = RunHandle.parse(first.tracking_run).run_id

    again = slime_args(tmp_path, wandb_run_id=run_id)  # slime's --wandb-run-id
    tracking.init_tracking(again)
    assert RunHandle.parse(again.tracking_run).run_id == run_id
    tracking.log(again, {"perf/x": 2.0, "rollout/step": 1}, "rollout/step")
    tracking.finish_tracking(again)
    run = read_run(tmp_path / "jsonl" / run_id)
    assert sorted((m["step"], m["value"]) for m in run.metrics) == [(0, 1.0), (1, 2.0)]
    assert len(list((tmp_path / "jsonl").iterdir())) == 1

    fresh = slime_args(tmp_path, wandb_run_id="abc123xy")  # no saved run: a run with that id
    tracking.init_tracking(fresh)
    assert RunHandle.parse(fresh.tracking_run).run_id == "abc123xy"


# -- options and switches ----------------------------------------------------------------------
def _slime_tracking_flags(parser: argparse.ArgumentParser) -> None:
    """slime's own tracking flags, added after add_custom_arguments as slime does."""
    for flag, dest in options.SLIME_TRACKING_OPTIONS.items():
        if flag == "--wandb-project":
            continue  # slime resets Megatron's
        if flag.startswith(("--use-", "--log-multi", "--log-pass", "--log-correct", "--wandb-always")):
            parser.add_argument(flag, action="store_true", default=False)
        elif flag == "--disable-wandb-random-suffix":
            parser.add_argument(flag, action="store_false", dest=dest, default=True)
        else:
            parser.add_argument(flag, type=str, default=None)


def test_options_fit_slimes_parser_before_and_after_its_flags() -> None:
    megatron = argparse.ArgumentParser()
    for flag in ("--tensorboard-dir", "--wandb-project", "--wandb-exp-name", "--wandb-save-dir"):
        megatron.add_argument(flag, default=None)
    parser = options.add_tracking_arguments(megatron)  # as slime's add_custom_arguments
    _slime_tracking_flags(parser)  # slime's flags after it: no argparse conflict
    ns = parser.parse_args(
        ["--tracking-backends", "mlflow,wandb", "--tracking-dir", "/tmp/t", "--use-wandb",
         "--wandb-key", "k", "--wandb-run-id", "r1", "--tracking-key-style", "slime"]
    )  # fmt: skip
    assert (ns.tracking_backends, ns.tracking_dir, ns.tracking_key_style) == ("mlflow,wandb", "/tmp/t", "slime")
    assert (ns.use_wandb, ns.wandb_key, ns.wandb_run_id) == (True, "k", "r1")
    assert ns.tensorboard_dir is None and ns.wandb_random_suffix is True

    full = argparse.ArgumentParser()
    _slime_tracking_flags(full)
    options.add_tracking_arguments(full)  # on a complete parser too
    assert full.parse_args(["--tracking-backends", "jsonl"]).tracking_backends == "jsonl"


@pytest.mark.parametrize(
    ("use_wandb", "use_tensorboard", "expected"),
    [(True, False, ["wandb"]), (False, True, ["tensorboard"]), (True, True, ["wandb", "tensorboard"])],
)
def test_slime_switches_select_backends(use_wandb: bool, use_tensorboard: bool, expected: list[str]) -> None:
    tracking.register_plugins()
    manager = tracking_core.get_plugin_manager()
    # the adapter's options never added to the parser: slime's switches decide
    args = argparse.Namespace(use_wandb=use_wandb, use_tensorboard=use_tensorboard)
    names, source = resolve_backend_names(args=args, manager=manager)
    assert (names, "slime" in source) == (expected, True)
    args.tracking_backends = "jsonl"  # the flag wins over slime's switches
    assert resolve_backend_names(args=args, manager=manager)[0] == ["jsonl"]


def test_no_switch_selects_nothing_through_the_hook() -> None:
    """No switch: the hook stays out of the choice (the drop-ins then track nothing, as slime:
    tests/slime/test_options.py; a plain start_run keeps the embedded default)."""
    args = argparse.Namespace(use_wandb=False, use_tensorboard=False, use_mlflow=False)
    assert options.host_backends(args) is None and options.host_backends(None) is None
    assert options.host_backends(argparse.Namespace(use_mlflow=True)) == ["mlflow"]


# -- the collector -------------------------------------------------------------------------------------
def test_collector_answers_only_inside_the_drop_ins() -> None:
    base = slime_args(Path("/nonexistent"))
    assert collectors.collect_config("critic", base) is None
    with collectors.collecting():
        critic = collectors.collect_config("critic", base)
        rollout = collectors.collect_config("rollout", base)
    assert critic is not None and rollout is not None
    assert critic["lr"] == pytest.approx(1e-5) and critic["kl_coef"] == 0
    assert rollout["lr"] == pytest.approx(1e-6)
    assert critic["parallel/num_nodes"] == 1 and rollout["parallel/num_gpus"] == 8


def test_collector_is_idempotent_on_already_resolved_args() -> None:
    """slime's Ray actors receive their role's resolved args: resolving again changes nothing."""
    recorded = load_fixture_namespaces(ARGS_JSON)
    for role in ("actor", "critic"):
        resolved = recorded[role]
        resolved.megatron_config_path = str(ROLES_YAML)
        values = collectors.role_args(role, resolved)
        assert values == vars(resolved)


def test_collector_logs_the_given_args_when_the_file_is_unreadable(caplog: pytest.LogCaptureFixture) -> None:
    base = slime_args(Path("/nonexistent"), megatron_config_path="/nonexistent/roles.yaml")
    with caplog.at_level(logging.WARNING, logger="tracking_core.slime.collectors"):
        values = collectors.role_args("critic", base)
    assert values["lr"] == pytest.approx(1e-6)  # what this process was given
    assert "could not resolve the critic args" in caplog.text
