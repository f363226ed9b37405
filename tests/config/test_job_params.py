"""Params hold the job: the tracking options (tracking-core's own and every plugin's
``add_options``, selected or not) leave every namespace's params for one ``tracking/`` group of
the launch config, set values only; no param is null; the JSON artifact keeps everything.

Checked on the pure step (:func:`tracking_core.config.job_params`) and end to end, through
``start_run(args)`` + ``attach`` and a host run (Accelerate's, Lightning's and verl's share
it), into a real ``mlflow server`` read back with ``MlflowClient``."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import tracking_core
from tests.helpers.mlflow_server import MlflowServer, mlflow_server  # noqa: F401 - session fixture
from tracking_core import options as opts
from tracking_core.config import TRACKING_GROUP, build_section, job_params
from tracking_core.handle import RUN_ENV

JOB = {"lr": 3e-4, "ppo_epochs": 4, "eps_clip": 0.2, "reward_path": None}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=JOB["lr"])
    parser.add_argument("--ppo-epochs", type=int, default=JOB["ppo_epochs"])
    parser.add_argument("--eps-clip", type=float, default=JOB["eps_clip"])
    parser.add_argument("--reward-path", default=None)
    tracking_core.add_tracking_options(parser)
    return parser


def _plugin_dests() -> set[str]:
    """Every destination the plugins' ``add_options`` and tracking-core add to an empty parser."""
    parser = argparse.ArgumentParser(add_help=False)
    tracking_core.add_tracking_options(parser)
    return {action.dest for action in parser._actions}


def _tracking_leaks(params: dict[str, Any], dests: set[str]) -> list[str]:
    """Param keys outside ``tracking/`` whose last part is a tracking option."""
    return [k for k in params if not k.startswith(TRACKING_GROUP) and k.rsplit("/", 1)[-1] in dests]


def test_plugin_options_are_tracking_options() -> None:
    dests = opts.tracking_option_dests()
    assert _plugin_dests() <= dests
    # every built-in tracker's options, selected or not, and tracking-core's own
    assert {"mlflow_tracking_uri", "wandb_project", "swanlab_mode", "trackio_project", "tensorboard_dir"} <= dests
    assert {"tracking_backends", "tracking_dir", "tracking_run_name", "console_interval"} <= dests
    assert not {"lr", "ppo_epochs", "help"} & dests


@pytest.mark.parametrize("style", ["default", "slime"])
def test_job_params_move_tracking_options_to_the_launch_group(style: str) -> None:
    args = _parser().parse_args(["--tracking-backends", "mlflow", "--wandb-project", "ppo"])
    dests = opts.tracking_option_dests()
    launch = job_params(build_section(args, None, style), dests)
    actor = job_params(build_section(args, "actor", style), dests)
    critic = job_params(build_section(args, "critic", style), dests)
    for section in (launch, actor, critic):
        assert not _tracking_leaks(dict(section.params), dests), section.namespace
        assert None not in section.params.values(), section.namespace
        # the namespace itself stays whole: the JSON artifact and the config text keep it all
        assert set(section.values) == set(vars(args))
    prefix = actor.prefix
    assert actor.params[prefix + "lr"] == 3e-4 and critic.params["critic/ppo_epochs"] == 4
    assert not [k for k in {**actor.params, **critic.params} if TRACKING_GROUP in k]
    if style == "default":
        assert launch.params == {
            "lr": 3e-4, "ppo_epochs": 4, "eps_clip": 0.2,
            "tracking/tracking_backends": "mlflow", "tracking/wandb_project": "ppo",
        }  # fmt: skip
    else:  # the slime style's launch config goes to its JSON artifact only
        assert launch.params == {}


def test_secret_tracking_options_stay_redacted() -> None:
    args = _parser().parse_args(["--swanlab-api-key", "sk-live-0123456789abcdef0123"])
    launch = job_params(build_section(args, None), opts.tracking_option_dests())
    value = launch.params["tracking/swanlab_api_key"]
    assert "0123456789abcdef" not in json.dumps(value)


def test_a_worker_that_never_saw_the_parser_knows_the_adapters_options() -> None:
    """A slime Ray actor gets args, not the parser: the adapter's own flags still count."""
    code = (
        "import json; from slime_integration import tracking; tracking.register_plugins(); "
        "from tracking_core.options import tracking_option_dests; "
        "print(json.dumps(sorted(tracking_option_dests())))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKING_CORE_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=True)
    dests = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert {"tracking_log_samples", "use_mlflow", "mlflow_experiment_name", "mlflow_tracking_uri"} <= dests
    # slime's own switches and Megatron's flags are slime's config, not the adapter's options
    assert not {"use_wandb", "wandb_key", "lr"} & dests


def _read_params(server: MlflowServer, experiment: str) -> tuple[Any, dict[str, str]]:
    from mlflow import MlflowClient

    client = MlflowClient(server.uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None
    (run,) = client.search_runs([exp.experiment_id])
    return run, dict(run.data.params)


@pytest.mark.slow
@pytest.mark.integration
def test_start_run_and_attach_log_only_the_job(mlflow_server: MlflowServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.delenv(RUN_ENV, raising=False)
    experiment = f"job-params-{uuid.uuid4().hex[:8]}"
    args = _parser().parse_args([
        "--tracking-backends", "mlflow", "--mlflow-tracking-uri", mlflow_server.uri,
        "--mlflow-experiment", experiment, "--tracking-dir", str(tmp_path),
        "--tracking-run-name", "my-ppo", "--tracking-delivery", "thread",
    ])  # fmt: skip
    run = tracking_core.start_run(args=args)
    for role, lr in (("actor", 3e-4), ("critic", 1e-3)):
        role_args = argparse.Namespace(**{**vars(args), "lr": lr})
        child = tracking_core.attach(run.handle, role=role, args=role_args, config=role_args, writer=True)
        assert child.flush(timeout=120)
        child.finish()
    assert run.flush(timeout=120)
    run.finish()

    mlrun, params = _read_params(mlflow_server, experiment)
    assert mlrun.info.run_name == "my-ppo"  # --tracking-run-name names the run
    dests = _plugin_dests()
    assert not _tracking_leaks(params, dests), _tracking_leaks(params, dests)
    assert not [k for k, v in params.items() if v in ("None", "null")]
    for prefix in ("", "actor/", "critic/"):
        assert {prefix + k for k in ("lr", "ppo_epochs", "eps_clip")} <= set(params), prefix
    assert params["critic/lr"] == "0.001" and params["actor/lr"] == "0.0003"
    group = {k: v for k, v in params.items() if TRACKING_GROUP in k}
    assert group == {
        "tracking/tracking_backends": "mlflow",
        "tracking/mlflow_tracking_uri": mlflow_server.uri,
        "tracking/mlflow_experiment": experiment,
        "tracking/tracking_dir": str(tmp_path),
        "tracking/tracking_run_name": "my-ppo",
        "tracking/tracking_delivery": "thread",
    }
    # the JSON artifacts keep every key, null values and tracking options included
    for namespace in ("launch", "actor", "critic"):
        saved = json.loads((run.run_dir / "config" / f"{namespace}.json").read_text())["values"]
        assert set(vars(args)) - {"tracking_run"} <= set(saved), namespace
        assert saved["reward_path"] is None and saved["mlflow_run_name"] is None, namespace


@pytest.mark.slow
@pytest.mark.integration
def test_a_host_run_logs_the_same_way(mlflow_server: MlflowServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Accelerate's, Lightning's and verl's adapters hold a HostRun: one mechanism for all."""
    from tracking_core.integrations.host_run import HostRun

    monkeypatch.delenv(RUN_ENV, raising=False)
    experiment = f"host-params-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    host = HostRun("accelerate", name="sft", project=experiment, backends="mlflow", tracking_dir=tmp_path)
    host.start({"lr": 1e-5, "warmup": None, "wandb_project": "sft", "mlflow_tags": None})
    host.finish()
    mlrun, params = _read_params(mlflow_server, experiment)
    assert params == {"lr": "1e-05", "tracking/wandb_project": "sft"}
