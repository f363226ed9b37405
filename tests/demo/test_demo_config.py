"""`tracking-core demo` logs only the job as params: no tracker option in any role's params, the
set ones once under the launch config's ``tracking/``, no null value, the PPO settings per role;
read back from a real ``mlflow server`` and from W&B's offline files. Each demo run has a name
of its own (``ppo-demo-<time>``) unless the user names it."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import tracking_core
from slime_integration.demo.driver import HYPERPARAMETERS, build_parser, run_name
from tests.helpers.mlflow_server import MlflowServer, mlflow_server  # noqa: F401 - session fixture
from tests.helpers.wandb_offline import W_VARS, merged_config, offline_env, read_job

NAME = re.compile(r"ppo-demo-\d{8}-\d{6}")


def _tracking_dests() -> set[str]:
    """Every destination tracking-core and the plugins' ``add_options`` add to an empty parser."""
    parser = argparse.ArgumentParser(add_help=False)
    tracking_core.add_tracking_options(parser)
    return {action.dest for action in parser._actions}


def _leaks(keys: list[str], dests: set[str]) -> list[str]:
    return [k for k in keys if not k.startswith("tracking/") and k.rsplit("/", 1)[-1] in dests]


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(900)
def test_demo_params_hold_only_the_job(mlflow_server: MlflowServer, tmp_path: Path) -> None:  # noqa: F811
    env = {k: v for k, v in os.environ.items() if k not in W_VARS and not k.startswith(("TRACKING_CORE_", "MLFLOW_"))}
    env.update(offline_env(tmp_path))
    env.pop("WANDB_DIR")
    out = tmp_path / "out"
    experiment = f"demo-{uuid.uuid4().hex[:8]}"
    started = time.strftime("ppo-demo-%Y%m%d-%H%M%S")
    proc = subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "demo", "--steps", "1", "--actor-ranks", "1",
         "--critic-ranks", "1", "--tracking-backends", "mlflow,wandb", "--out", str(out),
         "--mlflow-tracking-uri", mlflow_server.uri, "--mlflow-experiment", experiment],
        capture_output=True, text=True, env=env, timeout=800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    from mlflow import MlflowClient

    client = MlflowClient(mlflow_server.uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None
    (mlrun,) = client.search_runs([exp.experiment_id])
    params = dict(mlrun.data.params)
    dests = _tracking_dests()
    assert not _leaks(list(params), dests), _leaks(list(params), dests)
    assert not [k for k, v in params.items() if v in ("None", "null")]
    # the PPO settings, launch and per role
    settings = [k for k, v in HYPERPARAMETERS.items() if v is not None]
    for prefix in ("", "actor/", "critic/"):
        missing = [prefix + k for k in settings if prefix + k not in params]
        assert not missing, missing
    assert params["critic/lr"] == "0.01" and params["actor/lr"] == "0.003"
    # the tracking options that are set, once, under tracking/
    group = {k: v for k, v in params.items() if "tracking/" in k}
    assert all(k.startswith("tracking/") for k in group), sorted(group)
    assert group == {
        "tracking/tracking_backends": "mlflow,wandb",
        "tracking/tracking_dir": str(out),
        "tracking/mlflow_tracking_uri": mlflow_server.uri,
        "tracking/mlflow_experiment": experiment,
        "tracking/tracking_system_metrics": "1",
    }
    # a name of its own: the start time, read the way the demo names it
    assert NAME.fullmatch(mlrun.info.run_name) and mlrun.info.run_name >= started, mlrun.info.run_name

    # the saved JSON configs keep everything, and `show` and `diff` read them
    run_dir = next((out / "runs").iterdir())
    launch = json.loads((run_dir / "config" / "launch.json").read_text())["values"]
    assert {"mlflow_run_name", "wandb_project", "custom_advantage_function_path"} <= set(launch)
    for command in (["show", str(run_dir)], ["diff", str(run_dir), "--roles", "actor", "critic", "launch"]):
        shown = subprocess.run(
            [sys.executable, "-m", "tracking_core.cli", *command], capture_output=True, text=True, env=env, timeout=300
        )
        assert shown.returncode == 0, (command, shown.stdout[-2000:], shown.stderr[-2000:])
    # the roles' lr differs; the tracking options are the same everywhere, so no row of theirs
    assert re.search(r"^lr\s", shown.stdout, re.M), shown.stdout
    assert not [k for k in dests if re.search(rf"^{k}\s", shown.stdout, re.M)], shown.stdout

    # W&B's config, read with W&B's own reader: the same rule
    wandb_id = re.search(r"W&B offline run (\S+):", proc.stdout).group(1)
    config = {k: v for k, v in merged_config(read_job(out, wandb_id)).items() if not k.startswith("_")}
    assert not _leaks(list(config), dests), _leaks(list(config), dests)
    assert None not in config.values()
    assert config["critic/lr"] == 0.01 and config["tracking/tracking_backends"] == "mlflow,wandb"


def test_each_demo_run_has_a_name_of_its_own_unless_the_user_names_it() -> None:
    """The demo's naming on its real option parsing: two runs a second apart read apart."""
    first = run_name(build_parser().parse_args([]))
    time.sleep(1.05)
    second = run_name(build_parser().parse_args([]))
    assert NAME.fullmatch(first) and NAME.fullmatch(second) and first != second
    named = build_parser().parse_args(["--tracking-run-name", "lr-sweep-3e-3"])
    assert run_name(named) == "lr-sweep-3e-3"


@pytest.mark.slow
@pytest.mark.integration
def test_the_users_run_name_reaches_mlflow(mlflow_server: MlflowServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The demo starts its run as below: the user's name is the MLflow run's name, and a run
    named by the demo gets another."""
    monkeypatch.delenv("TRACKING_CORE_RUN", raising=False)
    experiment = f"demo-names-{uuid.uuid4().hex[:8]}"
    names = []
    for argv in ([], ["--tracking-run-name", "lr-sweep-3e-3"]):
        args = build_parser().parse_args([
            *argv, "--tracking-backends", "mlflow", "--mlflow-tracking-uri", mlflow_server.uri,
            "--mlflow-experiment", experiment, "--tracking-dir", str(tmp_path), "--tracking-delivery", "thread",
        ])  # fmt: skip
        run = tracking_core.start_run(args=args, name=run_name(args))
        assert run.flush(timeout=120)
        run.finish()
        names.append(run.handle.name)
    from mlflow import MlflowClient

    client = MlflowClient(mlflow_server.uri)
    exp = client.get_experiment_by_name(experiment)
    got = sorted(r.info.run_name for r in client.search_runs([exp.experiment_id]))
    assert got == sorted(names) and "lr-sweep-3e-3" in got
    assert [n for n in got if NAME.fullmatch(n)] == [n for n in got if n != "lr-sweep-3e-3"]
