"""slime's command line with the adapter: what turns tracking on, and the proposed MLflow flags.

The parser is the stand-in of ``slime.utils.arguments`` (tests/slime/stand_in): Megatron's
options first, then ``add_custom_arguments``, then slime's own tracking flags, as slime builds
it. ``PROPOSED_MLFLOW_FLAGS`` makes it define the MLflow flags of THUDM/slime#2099 / #1591 the
way slime will once one of them is merged (after ``add_custom_arguments``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import tracking_core
from slime_integration import install as installer
from slime_integration import options, tracking
from tracking_core.handle import RUN_ENV
from tracking_core.selection import embedded_default, resolve_backend_names

STAND_IN = Path(__file__).resolve().parent / "stand_in"
ISOLATED_ENV = (
    RUN_ENV,
    "TRACKING_CORE_BACKENDS",
    "TRACKING_CORE_DIR",
    "TRACKING_CORE_WRITER",
    "MLFLOW_TRACKING_URI",
    "MLFLOW_EXPERIMENT_NAME",
    "TENSORBOARD_DIR",
    "WANDB_MODE",
    "WANDB_DIR",
    installer.ENV_VAR,
    "PYTHONPATH",
)


def _forget_stand_in() -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in ("slime", "train"):
            del sys.modules[name]


@pytest.fixture
def arguments(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The stand-in ``slime.utils.arguments``; nothing of it (or of the adapter) left behind."""
    for name in ISOLATED_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.syspath_prepend(str(STAND_IN))
    _forget_stand_in()
    try:
        from slime.utils import arguments as module

        yield module
    finally:
        installer.uninstall()
        tracking.reset()
        tracking.unregister_plugins()
        _forget_stand_in()


# -- 13: no switch, no tracking --------------------------------------------------------------------
def test_without_a_switch_the_drop_ins_track_nothing_and_say_so_once(
    arguments: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)  # the default tracking dir would be ./tracking-runs
    args = arguments.parse_args(add_custom_arguments=options.add_tracking_arguments, argv=[])
    assert (args.use_wandb, args.use_tensorboard, args.use_mlflow, args.tracking_backends) == (
        False, False, False, None,
    )  # fmt: skip
    assert not options.tracking_requested(args)
    with caplog.at_level(logging.DEBUG, logger="tracking_core"):
        assert tracking.init_tracking(args) is None
        assert tracking.init_tracking(args) is None  # called again: still one line
        rollout = argparse.Namespace(**vars(args))
        assert tracking.init_tracking(rollout, primary=False) is None
        assert tracking.init_tracking(rollout, primary=False, role="actor") is None
        tracking.log(rollout, {"rollout/raw_reward": 1.0, "rollout/step": 0}, "rollout/step")
        tracking.log(args, {"train/pg_loss": 1.0, "train/step": 0}, "train/step")
        tracking.finish_tracking(rollout)
        tracking.finish_tracking(args)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    message = warnings[0].getMessage()
    assert message.startswith("slime tracking is off")
    assert "--tracking-backends mlflow" in message and "--use-wandb" in message
    assert tracking.current_run() is None and RUN_ENV not in os.environ
    assert not hasattr(args, "tracking_run")
    assert list(tmp_path.iterdir()) == []  # nothing written anywhere: no store, no handle


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--use-wandb"], None, ["wandb"]),
        (["--use-tensorboard"], None, ["tensorboard"]),
        (["--use-mlflow"], None, ["mlflow"]),
        (["--use-mlflow", "--use-wandb"], None, ["wandb", "mlflow"]),
        (["--tracking-backends", "jsonl"], None, ["jsonl"]),
        ([], "jsonl", ["jsonl"]),
        (["--tracking-backends", "none"], None, []),
    ],
)
def test_what_turns_tracking_on(
    arguments: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: str | None,
    expected: list[str],
) -> None:
    if env:
        monkeypatch.setenv("TRACKING_CORE_BACKENDS", env)
    args = arguments.parse_args(add_custom_arguments=options.add_tracking_arguments, argv=argv)
    assert options.tracking_requested(args)
    names, _ = resolve_backend_names(args=args, manager=tracking_core.get_plugin_manager())
    assert names == expected


def test_a_plain_start_run_keeps_the_embedded_default(arguments: ModuleType) -> None:
    """Only the drop-ins follow slime; tracking-core's own API still falls back to the store."""
    tracking.register_plugins()
    manager = tracking_core.get_plugin_manager()
    args = arguments.parse_args(add_custom_arguments=options.add_tracking_arguments, argv=[])
    assert resolve_backend_names(args=None, manager=manager) == ([embedded_default()], "the embedded default")
    assert resolve_backend_names(args=args, manager=manager)[0] == [embedded_default()]


# -- 16: the proposed MLflow flags ---------------------------------------------------------------
PROPOSED_ARGV = [
    "--use-mlflow",
    "--mlflow-tracking-uri", "http://127.0.0.1:5999",
    "--mlflow-experiment-name", "ppo-exp",
    "--mlflow-run-name", "ppo-run",
]  # fmt: skip


def _values(ns: argparse.Namespace) -> tuple[object, ...]:
    return (ns.use_mlflow, ns.mlflow_tracking_uri, ns.mlflow_experiment_name, ns.mlflow_run_name)


EXPECTED = (True, "http://127.0.0.1:5999", "ppo-exp", "ppo-run")


def test_the_proposed_mlflow_flags_are_accepted_by_todays_slime(arguments: ModuleType) -> None:
    parser = arguments.build_parser(options.add_tracking_arguments)
    ns = parser.parse_args(PROPOSED_ARGV)
    assert _values(ns) == EXPECTED
    assert options.selected_by_switches(ns) == ["mlflow"]
    for flag in options.SLIME_PROPOSED_OPTIONS:
        assert getattr(parser._option_string_actions[flag], options.YIELDS_ATTR, False), flag
    # the experiment alias reaches the MLflow backend under its own option name
    assert tracking._start_options(ns)["mlflow_experiment"] == "ppo-exp"
    ns.mlflow_experiment = "explicit"
    assert "mlflow_experiment" not in tracking._start_options(ns)  # the backend's own flag wins


def test_slime_defining_them_later_takes_them_over_without_a_clash(
    arguments: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As add_custom_arguments, the adapter runs before slime's flags exist: the flags it defined
    give way to slime's when slime adds them; any other conflict still fails."""
    monkeypatch.setattr(arguments, "PROPOSED_MLFLOW_FLAGS", True)
    parser = arguments.build_parser(options.add_tracking_arguments)  # no argparse.ArgumentError
    for flag in options.SLIME_PROPOSED_OPTIONS:
        actions = [a for a in parser._actions if flag in a.option_strings]
        assert len(actions) == 1, flag
        assert actions[0].help == "slime's" and not getattr(actions[0], options.YIELDS_ATTR, False)
    assert "--use-mlflow" in parser.format_help()
    assert _values(parser.parse_args(PROPOSED_ARGV)) == EXPECTED
    assert parser.parse_args([]).use_mlflow is False
    with pytest.raises(argparse.ArgumentError, match="--tracking-dir"):
        parser.add_argument("--tracking-dir")  # not one of the proposed flags: argparse's error


def test_a_parser_that_already_defines_them_is_reused(
    arguments: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After install() the options are added to slime's complete parser: slime's are reused."""
    monkeypatch.setattr(arguments, "PROPOSED_MLFLOW_FLAGS", True)
    installer.install()
    parser = arguments.build_parser()
    assert "--tracking-backends" in parser._option_string_actions
    for flag in options.SLIME_PROPOSED_OPTIONS:
        action = parser._option_string_actions[flag]
        assert action.help == "slime's" and not getattr(action, options.YIELDS_ATTR, False), flag
    ns = parser.parse_args(PROPOSED_ARGV)
    assert _values(ns) == EXPECTED and options.selected_by_switches(ns) == ["mlflow"]
    # and on a plain parser that has them (any host): reused, never defined twice
    plain = argparse.ArgumentParser()
    for flag in options.SLIME_PROPOSED_OPTIONS:
        plain.add_argument(flag, default=None)
    options.add_tracking_arguments(plain)
    assert not getattr(plain, "_tracking_core_yielding", False)
    assert plain.parse_args(["--mlflow-experiment-name", "x"]).mlflow_experiment_name == "x"


@pytest.mark.integration
def test_use_mlflow_logs_to_the_named_experiment_and_run(
    arguments: ModuleType, tmp_path: Path
) -> None:
    """``--use-mlflow`` with the proposed names, end to end into a real (embedded) MLflow store."""
    pytest.importorskip("mlflow")
    argv = [
        "--use-mlflow", "--mlflow-experiment-name", "ppo-exp", "--mlflow-run-name", "ppo-run",
        "--tracking-dir", str(tmp_path),
    ]  # fmt: skip
    args = arguments.parse_args(add_custom_arguments=options.add_tracking_arguments, argv=argv)
    run = tracking.init_tracking(args)
    assert run is not None and run.backends == ["mlflow"]
    tracking.log(args, {"rollout/raw_reward": 0.5, "rollout/step": 3}, "rollout/step")
    assert run.flush(timeout=180)  # a new SQLite store migrates first: slow on a busy machine
    tracking.finish_tracking(args)

    from mlflow import MlflowClient

    entry = run.handle.backends["mlflow"]
    client = MlflowClient(entry["tracking_uri"])
    experiment = client.get_experiment_by_name("ppo-exp")
    assert experiment is not None
    ml_run = client.get_run(entry["run_id"])
    assert ml_run.info.experiment_id == experiment.experiment_id
    assert ml_run.info.run_name == "ppo-run"
    assert ml_run.data.params["tracking/mlflow_experiment_name"] == "ppo-exp"
    history = client.get_metric_history(entry["run_id"], "rollout/raw_reward")
    assert [(m.step, m.value) for m in history] == [(3, 0.5)]
