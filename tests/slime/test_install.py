"""install(): slime's own call sites use the drop-ins, in the driver and in the processes it starts.

The stand-in ``slime`` package (tests/slime/stand_in) has slime's module paths and signatures only:
``slime.observability.logging_utils`` with functions that record their calls, modules that did
``from slime.observability.logging_utils import init_tracking`` (the rollout manager, the Megatron
actor, ``train.py``), and ``slime.utils.arguments`` shaped like slime's parser.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tracking_jsonl.reader import read_run

from slime_integration import install as installer
from slime_integration import tracking
from tests.helpers.subprocess_python import JOBS, run_python
from tracking_core.handle import RUN_ENV

STAND_IN = Path(__file__).resolve().parent / "stand_in"
STAND_IN_MODULES = ("slime", "train")


def _forget_stand_in() -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in STAND_IN_MODULES:
            del sys.modules[name]


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The stand-in slime importable in this process; hook, variables and modules undone after."""
    for name in (installer.ENV_VAR, "PYTHONPATH", RUN_ENV, "TRACKING_CORE_BACKENDS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.syspath_prepend(str(STAND_IN))
    _forget_stand_in()
    try:
        yield STAND_IN
    finally:
        installer.uninstall()
        tracking.reset()
        tracking.unregister_plugins()
        _forget_stand_in()


def slime_args(tmp: Path) -> argparse.Namespace:
    return argparse.Namespace(
        lr=1e-6, use_wandb=False, use_tensorboard=False, wandb_key=None, wandb_run_id=None,
        megatron_config_path=None, tracking_backends="jsonl", tracking_dir=str(tmp),
    )  # fmt: skip


def test_install_reaches_call_sites_imported_before_and_after(stand_in: Path, tmp_path: Path) -> None:
    import slime.backends.megatron_utils.actor as actor_module  # binds slime's own, before install
    from slime.observability import logging_utils

    original = logging_utils.init_tracking
    assert actor_module.init_tracking is original

    installer.install()
    import train
    from slime.ray import rollout

    for module in (logging_utils, rollout, train, actor_module):
        assert module.init_tracking is tracking.init_tracking, module.__name__
    assert logging_utils.log is tracking.log and logging_utils.finish_tracking is tracking.finish_tracking
    assert train.finish_tracking is tracking.finish_tracking
    assert installer.is_active() and os.environ[installer.ENV_VAR] == "1"
    assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(installer.BOOTSTRAP_DIR)

    # slime's call sites now log through tracking-core
    args = slime_args(tmp_path)
    logging_utils.init_tracking(args)
    manager = rollout.RolloutManager(argparse.Namespace(**vars(args)))
    manager.log_rollout(0, {"rollout/raw_reward": 1.0})
    trainer = actor_module.MegatronTrainRayActor()
    trainer.init(argparse.Namespace(**vars(args)), "critic")
    trainer.train_step(0, {"value_loss": 0.5})
    manager.dispose()
    tracking.reset()
    assert [c[0] for c in logging_utils.ORIGINAL_CALLS] == ["configure_logger"]
    run = read_run(next((tmp_path / "jsonl").iterdir()))
    assert sorted(run.configs) == ["critic", "launch", "rollout"]
    assert run.metric_counts() == {"rollout/raw_reward": 1, "train/critic-value_loss": 1}

    ours = tracking.init_tracking

    installer.uninstall()
    for module in (logging_utils, rollout, train, actor_module):
        assert module.init_tracking is original, module.__name__
    assert tracking.init_tracking is ours  # the drop-ins' own module is never rebound
    assert not installer.is_active() and installer.ENV_VAR not in os.environ
    assert "PYTHONPATH" not in os.environ


def test_install_is_idempotent(stand_in: Path) -> None:
    installer()  # `from slime_integration import install; install()`: the module is callable
    installer.install()
    from slime.observability import logging_utils

    assert sum(getattr(f, "hook", None) is installer._hook for f in sys.meta_path) == 1
    assert os.environ["PYTHONPATH"].split(os.pathsep).count(str(installer.BOOTSTRAP_DIR)) == 1
    assert set(vars(logging_utils)[installer.ORIGINALS_ATTR]) == set(installer.DROP_INS)
    assert pickle.loads(pickle.dumps(installer)) is installer  # Ray pickles code that uses it


def test_slimes_parser_gets_the_tracking_options(stand_in: Path) -> None:
    from slime.utils import arguments

    argv = ["--tracking-backends", "mlflow", "--use-wandb", "--wandb-key", "k", "--wandb-mode", "offline"]
    with pytest.raises(SystemExit):  # slime's parser alone does not know the flag
        arguments.parse_args(argv=argv)
    from slime_integration.options import add_tracking_arguments

    # by hand, as add_custom_arguments (before slime's own tracking flags exist): no conflict
    ns = arguments.parse_args(add_custom_arguments=add_tracking_arguments, argv=argv)
    assert (ns.tracking_backends, ns.use_wandb, ns.wandb_key) == ("mlflow", True, "k")

    installer.install()  # or installed: slime's own parse_args adds them
    ns = arguments.parse_args(argv=[*argv, "--tracking-dir", "/tmp/x"])
    assert (ns.tracking_backends, ns.tracking_dir, ns.wandb_mode) == ("mlflow", "/tmp/x", "offline")
    def add_extra(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument("--extra", default="e")
        return parser

    custom = arguments.parse_args(add_custom_arguments=add_extra, argv=argv)
    assert (custom.extra, custom.tracking_backends) == ("e", "mlflow")


DRIVER = JOBS / "install_slime_driver.py"

CHILD = JOBS / "install_slime_child.py"


# nothing of the test process's run or W&B settings reaches the job's processes
DROP = ("TRACKING_CORE_*", "WANDB_*")


@pytest.mark.slow
def test_a_child_process_of_the_driver_uses_the_drop_ins(tmp_path: Path) -> None:
    """The driver installs; its child (slime's rollout manager here) starts a fresh interpreter,
    imports slime, attaches through slime's own call site and logs into the driver's run."""
    proc = run_python(
        DRIVER,
        args=[tmp_path, CHILD],
        env={"PYTHONPATH": str(STAND_IN)},
        drop=DROP,
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["driver"] is True
    assert out["child_rc"] == 0, out["child_err"]
    child = json.loads(out["child"].strip().splitlines()[-1])
    assert child["patched"] is True
    assert child["original_calls"] == [["configure_logger", ""]]
    assert child["sitecustomize"] == str(installer.BOOTSTRAP_DIR / "sitecustomize.py")
    runs = list((tmp_path / "jsonl").iterdir())
    assert len(runs) == 1, runs
    run = read_run(runs[0])
    assert run.status == "FINISHED"
    assert sorted(run.configs) == ["launch", "rollout"]
    assert sorted((m["name"], m["step"]) for m in run.metrics) == [
        ("rollout/raw_reward", 0), ("rollout/raw_reward", 1), ("rollout/raw_reward", 2)
    ]  # fmt: skip


PROBE = """
import json, sys
from slime.observability import logging_utils
from slime.backends.megatron_utils import actor
print(json.dumps({"module": logging_utils.init_tracking.__module__,
                  "actor": actor.init_tracking.__module__,
                  "shadowed": getattr(sys, "shadowed_sitecustomize_ran", False)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("requested", [True, False])
def test_bootstrap_activates_only_when_asked_and_runs_the_shadowed_sitecustomize(
    tmp_path: Path, requested: bool
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import sys\nsys.shadowed_sitecustomize_ran = True\n")
    path = os.pathsep.join([str(installer.BOOTSTRAP_DIR), str(other), str(STAND_IN)])
    env = {"PYTHONPATH": path, **({installer.ENV_VAR: "1"} if requested else {})}
    proc = run_python(PROBE, env=env, drop=DROP, timeout=60)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = "slime_integration.tracking" if requested else "slime.observability.logging_utils"
    assert (out["module"], out["actor"], out["shadowed"]) == (expected, expected, True)


def test_child_environment_and_ray_runtime_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/opt/a")
    env = installer.child_environment()
    assert env == {installer.ENV_VAR: "1", "PYTHONPATH": os.pathsep.join([str(installer.BOOTSTRAP_DIR), "/opt/a"])}
    given = {"env_vars": {"PYTHONPATH": "/root/Megatron-LM/", "X": "1"}, "pip": ["x"]}
    runtime_env = installer.ray_runtime_env(given)
    assert runtime_env["env_vars"] == {
        "X": "1",
        installer.ENV_VAR: "1",
        "PYTHONPATH": os.pathsep.join([str(installer.BOOTSTRAP_DIR), "/root/Megatron-LM/"]),
    }
    assert runtime_env["pip"] == ["x"] and given["env_vars"]["PYTHONPATH"] == "/root/Megatron-LM/"
    assert runtime_env["worker_process_setup_hook"] == "slime_integration.install.activate"
    mine = installer.ray_runtime_env({"worker_process_setup_hook": "my.hook"})
    assert mine["worker_process_setup_hook"] == "my.hook"  # theirs is kept; PYTHONPATH still works


def test_module_main_prints_what_a_launch_script_needs(capsys: pytest.CaptureFixture[str]) -> None:
    assert installer.main([]) == 0
    out = capsys.readouterr().out
    assert f"export {installer.ENV_VAR}=1" in out and str(installer.BOOTSTRAP_DIR) in out
    assert installer.main(["--json"]) == 0
    runtime_env = json.loads(capsys.readouterr().out)
    assert runtime_env["env_vars"][installer.ENV_VAR] == "1"


def test_a_broken_patch_leaves_slime_importable(stand_in: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(module: object) -> bool:
        raise RuntimeError("boom")

    monkeypatch.setitem(installer._PATCHERS, "slime.observability.logging_utils", broken)
    installer.activate()
    from slime.observability import logging_utils

    assert logging_utils.init_tracking.__module__ == "slime.observability.logging_utils"


class _Probe:
    """A Ray actor that imports (stand-in) slime and says whose init_tracking it got."""

    def probe(self) -> dict[str, object]:
        from slime.backends.megatron_utils import actor
        from slime.observability import logging_utils

        return {
            "module": logging_utils.init_tracking.__module__,
            "actor": actor.init_tracking.__module__,
            "inherited": os.environ.get(installer.ENV_VAR),
        }


@pytest.mark.slow
def test_ray_runtime_env_reaches_workers_that_inherit_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ray cluster whose workers do not inherit the driver's environment (other nodes, `ray job
    submit`): the job's runtime_env from ray_runtime_env() activates the hook in every worker,
    also in actors that bring their own env_vars, as slime's do."""
    ray = pytest.importorskip("ray")
    for name in (installer.ENV_VAR, "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    module = sys.modules[__name__]
    ray.cloudpickle.register_pickle_by_value(module)
    runtime_env = installer.ray_runtime_env({"env_vars": {"PYTHONPATH": str(STAND_IN)}})
    # the setup hook alone (no bootstrap on the path) must do it too
    runtime_env["env_vars"]["PYTHONPATH"] = str(STAND_IN)
    runtime_env["env_vars"].pop(installer.ENV_VAR)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
    try:
        probe = ray.remote(num_cpus=0)(_Probe)
        plain = probe.remote()
        own_env = probe.options(runtime_env={"env_vars": {"SLIME_ACTOR_VAR": "1"}}).remote()
        results = ray.get([plain.probe.remote(), own_env.probe.remote()])
    finally:
        ray.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(module)
    for result in results:
        assert result == {
            "module": "slime_integration.tracking",
            "actor": "slime_integration.tracking",
            "inherited": None,
        }
