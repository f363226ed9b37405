"""verl's own ``Tracking`` and ``ValidationGenerationsLogger`` after ``verl_integration.install()``.

The config has the shape of verl's PPO trainer config (its sections, its interpolations, a few
settings each, different learning rates per role) and is handed to ``Tracking`` exactly as
``RayPPOTrainer.fit`` does (``OmegaConf.to_container(config, resolve=True)``,
``default_backend=config.trainer.logger``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.subprocess_python import JOBS
from tests.hosts.conftest import (
    HostsEnv,
    RaisingBackend,
    close_to,
    jsonl_lines,
    mlflow_artifact_json,
    mlflow_history,
    mlflow_run_id,
    tensorboard_runs,
)

verl_tracking = pytest.importorskip("verl.utils.tracking", reason="needs tracking-core[verl]")

from omegaconf import OmegaConf  # noqa: E402

import verl_integration  # noqa: E402
from verl_integration import install as verl_install  # noqa: E402
from verl_integration import tracking as verl_adapter  # noqa: E402

STEPS = 4
#: What each step logs: verl's own metric names (``compute_data_metrics``, ``timing_s``, ...).
METRIC_NAMES = ("actor/pg_loss", "actor/entropy", "critic/vf_loss", "critic/score/mean", "timing_s/gen", "training/global_step")


#: The shape of verl's PPO config (``verl/trainer/config/ppo_trainer.yaml``), cut down to a few
#: settings per section, with verl's own interpolations between sections.
VERL_YAML = """
actor_rollout_ref:
  hybrid_engine: true
  model:
    path: Qwen/Qwen2.5-0.5B-Instruct
    enable_gradient_checkpointing: true
    lora_rank: 0
  actor:
    strategy: fsdp
    ppo_mini_batch_size: 32
    ppo_epochs: 1
    clip_ratio: 0.2
    use_kl_loss: true
    kl_loss_coef: 0.001
    optim:
      lr: 3.0e-06
      lr_warmup_steps_ratio: 0.0
      weight_decay: 0.01
    fsdp_config:
      param_offload: false
      wrap_policy: {}
  ref:
    strategy: ${actor_rollout_ref.actor.strategy}
    log_prob_micro_batch_size_per_gpu: 4
    optim:
      lr: 0.0
  rollout:
    name: vllm
    n: 5
    temperature: 0.7
    response_length: 512
    gpu_memory_utilization: 0.5
    optim:
      lr: 1.0e-07
critic:
  strategy: ${actor_rollout_ref.actor.strategy}
  ppo_mini_batch_size: 16
  cliprange_value: 0.5
  optim:
    lr: 2.0e-05
    weight_decay: 0.01
  model:
    path: ${actor_rollout_ref.model.path}
reward_model:
  enable: false
  strategy: fsdp
algorithm:
  adv_estimator: gae
  gamma: 1.0
  lam: 1.0
  kl_ctrl:
    type: fixed
    kl_coef: 0.001
data:
  train_batch_size: 64
  max_prompt_length: 256
trainer:
  project_name: hosts-verl
  experiment_name: ppo-qwen
  logger: []
  total_epochs: 1
  n_gpus_per_node: 8
  wandb_api_key: sk-verl0123456789abcdefghijklmnop
"""


def verl_config(logger: list[str]) -> Any:
    """A verl-shaped config: verl's sections, differing learning rates per role."""
    config = OmegaConf.create(VERL_YAML)
    config.trainer.logger = logger
    return config


def metrics_at(step: int) -> dict[str, float]:
    return {name: round(0.5 * step + i / 10, 4) for i, name in enumerate(METRIC_NAMES)}


@pytest.fixture
def installed() -> Iterator[None]:
    verl_integration.install()
    try:
        yield
    finally:
        verl_adapter.reset()
        verl_install.uninstall()


def _train(config: Any) -> Any:
    """What ``RayPPOTrainer.fit`` does with its tracker (and ``_maybe_log_val_generations``)."""
    from verl.utils.tracking import Tracking, ValidationGenerationsLogger

    logger = Tracking(
        project_name=config.trainer.project_name,
        experiment_name=config.trainer.experiment_name,
        default_backend=config.trainer.logger,
        config=OmegaConf.to_container(config, resolve=True),
    )
    generations = ValidationGenerationsLogger(config.trainer.project_name, config.trainer.experiment_name)
    for step in range(1, STEPS + 1):
        logger.log(data=metrics_at(step), step=step)
    samples = [("1+1=", "2", 1.0), ("2+2=", "5", 0.0)]
    generations.log(config.trainer.logger, samples, STEPS)
    run = logger.logger["tracking_core"].run
    logger.finish()
    return run


@pytest.mark.slow
def test_verl_tracking_logs_one_run_with_role_namespaces(hosts_env: HostsEnv, installed: None) -> None:
    config = verl_config(["tracking_core"])
    run = _train(config)
    summary = run.finished
    assert summary is not None and summary.drained, summary.describe() if summary else None

    client = hosts_env.client()
    run_id = mlflow_run_id(run)
    mlflow_run = client.get_run(run_id)
    assert mlflow_run.info.status == "FINISHED"
    assert mlflow_run.info.run_name == "ppo-qwen"
    assert client.get_experiment(mlflow_run.info.experiment_id).name == "hosts-verl"
    # one run: nothing else in the experiment
    assert [r.info.run_id for r in client.search_runs([mlflow_run.info.experiment_id])] == [run_id]

    params = mlflow_run.data.params
    # the launch config: the whole resolved config, keyed by Hydra override paths
    assert params["actor_rollout_ref.actor.optim.lr"] == "3e-06"
    assert params["critic.optim.lr"] == "2e-05"
    assert params["trainer.experiment_name"] == "ppo-qwen"
    # the roles' namespaces, from verl's sections
    assert params["actor/optim.lr"] == "3e-06"
    assert params["actor/ppo_mini_batch_size"] == "32"
    assert params["actor/model.path"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert params["critic/optim.lr"] == "2e-05"
    assert params["critic/ppo_mini_batch_size"] == "16"
    assert params["rollout/n"] == "5"
    assert params["rollout/temperature"] == "0.7"
    assert params["rollout/optim.lr"] == "1e-07"
    assert params["ref/log_prob_micro_batch_size_per_gpu"] == "4"
    assert params["ref/strategy"] == "fsdp"  # verl's interpolation, resolved
    assert params["critic/model.path"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert not any(key.startswith("reward_model/") for key in params)  # enable: false
    assert params["trainer.wandb_api_key"].startswith("<redacted")

    # lossless JSON per namespace, comparable with `tracking-core diff`
    actor = mlflow_artifact_json(client, run_id, "config/actor.json")["values"]
    critic = mlflow_artifact_json(client, run_id, "config/critic.json")["values"]
    launch = mlflow_artifact_json(client, run_id, "config/launch.json")["values"]
    assert actor["optim.lr"] == 3e-06 and critic["optim.lr"] == 2e-05
    assert launch["actor_rollout_ref.rollout.n"] == 5 and launch["trainer.logger"] == ["tracking_core"]
    assert actor["fsdp_config.wrap_policy"] == {} and "sk-verl" not in json.dumps(launch)

    # every metric at every step, names unchanged
    for name in METRIC_NAMES:
        expected = [(step, metrics_at(step)[name]) for step in range(1, STEPS + 1)]
        assert mlflow_history(client, run_id, name) == expected, name

    tb = tensorboard_runs(run)
    scalars = {tag: points for sub in tb.values() for tag, points in sub.scalars.items()}
    for name in METRIC_NAMES:
        points = scalars[name]
        assert [s for s, _ in points] == list(range(1, STEPS + 1)), name
        assert all(close_to(v, metrics_at(s)[name]) for s, v in points), name
    hparams = {key: value for sub in tb.values() for key, value in sub.hparams.items()}
    assert any(close_to(float(v), 3e-06) for k, v in hparams.items() if k.endswith("optim.lr") and "actor" in k), hparams.keys()
    texts = {tag for sub in tb.values() for tag in sub.text}
    assert {"config/launch", "config/actor", "config/critic"} <= texts

    # the validation samples: a table where tracking-core has tables
    from tracking_core.runs import Run

    tables = [line for line in jsonl_lines(run) if line.get("type") == "table"]
    if hasattr(Run, "log_table"):
        assert len(tables) == 1 and tables[0]["key"] == "val/generations"
        assert tables[0]["columns"] == ["input", "output", "score"]
        assert tables[0]["rows"] == [["1+1=", "2", 1.0], ["2+2=", "5", 0.0]]
        assert tables[0]["step"] == STEPS


@pytest.mark.slow
def test_backend_names_verl_knows_and_unknown_ones(hosts_env: HostsEnv, installed: None, capsys: pytest.CaptureFixture[str]) -> None:
    from verl.utils.tracking import Tracking

    # tracking-core takes `jsonl`; verl's console stays verl's printout
    logger = Tracking("hosts-verl", "named", ["console", "jsonl"], {"trainer": {"logger": ["console", "jsonl"]}})
    assert sorted(logger.logger) == ["console", "tracking_core"]
    assert logger.logger["tracking_core"].run.backends == ["jsonl"]
    logger.log({"critic/vf_loss": 1.5}, step=3)
    run = logger.logger["tracking_core"].run
    logger.finish()
    assert "critic/vf_loss:1.5" in capsys.readouterr().out
    metrics = [(m["key"], m["step"], m["value"]) for m in jsonl_lines(run) if m.get("type") == "metric"]
    assert metrics == [("critic/vf_loss", 3, 1.5)]
    # an unknown name keeps verl's own message
    with pytest.raises(AssertionError, match="^not_a_tracker is not supported$"):
        Tracking("hosts-verl", "bad", ["tracking_core", "not_a_tracker"], {})


@pytest.mark.slow
def test_a_tracker_that_always_raises_does_not_stop_verl(raising_backend: type[RaisingBackend], installed: None) -> None:
    config = verl_config(["tracking_core"])
    run = _train(config)
    assert run.backends == ["raising", "jsonl"]
    assert {"open_run"} <= set(raising_backend.calls)
    metrics = [m for m in jsonl_lines(run) if m.get("type") == "metric"]
    assert len(metrics) == STEPS * len(METRIC_NAMES)


@pytest.mark.slow
def test_install_reaches_a_child_interpreter(tmp_path: Path, installed: None) -> None:
    """A process started after install() (a Ray worker, a torchrun rank) routes verl too."""
    out = subprocess.run([sys.executable, str(JOBS / "verl_child_routed.py")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "routed", out.stderr[-3000:]
    env = verl_install.ray_runtime_env({"env_vars": {"PYTHONPATH": "/x"}})
    assert env["worker_process_setup_hook"] == "verl_integration.install.activate"
    assert env["env_vars"]["TRACKING_CORE_VERL"] == "1"
    assert env["env_vars"]["PYTHONPATH"].split(":") == [str(verl_install.BOOTSTRAP_DIR), "/x"]


def test_uninstall_restores_verl() -> None:
    from verl.utils.tracking import Tracking

    original = Tracking.__init__
    verl_integration.install(children=False)
    try:
        assert Tracking.__init__ is verl_adapter.tracking_init
    finally:
        verl_install.uninstall()
    assert Tracking.__init__ is original and "tracking_core" not in Tracking.supported_backend
    with pytest.raises(AssertionError, match="tracking_core is not supported"):
        Tracking("p", "e", ["tracking_core"])


@pytest.mark.slow
@pytest.mark.parametrize("hosts", [("VERL", "SLIME"), ("VERL",), ("SLIME",)])
def test_one_bootstrap_activates_each_host_asked_for_once(tmp_path: Path, hosts: tuple[str, ...]) -> None:
    """Both adapters install the same start-up hook: one PYTHONPATH entry however many hosts a
    job uses, each host asked for activated once, the others left alone; uninstalling one keeps
    the entry while the other still needs it."""
    from slime_integration import install as slime_install

    assert verl_install.BOOTSTRAP_DIR == slime_install.BOOTSTRAP_DIR
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRACKING_CORE_RUN", "TRACKING_CORE_VERL", "TRACKING_CORE_SLIME")},
        "PYTHONPATH": str(verl_install.BOOTSTRAP_DIR),
        **{f"TRACKING_CORE_{h}": "1" for h in hosts},
    }
    code = (
        "import sys, verl_integration.install as v, slime_integration.install as s\n"
        "print(v.is_active(), s.is_active(), sum(type(f).__name__ == 'HostFinder' for f in sys.meta_path))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    want = [str("VERL" in hosts), str("SLIME" in hosts), str(len(hosts))]
    assert out.returncode == 0 and out.stdout.split() == want, out.stderr[-2000:]


def test_uninstalling_one_host_keeps_the_bootstrap_for_the_other(monkeypatch: pytest.MonkeyPatch) -> None:
    from slime_integration import install as slime_install

    for name in ("PYTHONPATH", "TRACKING_CORE_VERL", "TRACKING_CORE_SLIME"):
        monkeypatch.delenv(name, raising=False)
    slime_install.install()
    verl_install.install()
    try:
        assert os.environ["PYTHONPATH"].split(os.pathsep) == [str(verl_install.BOOTSTRAP_DIR)]
        verl_install.uninstall()
        assert "TRACKING_CORE_VERL" not in os.environ and os.environ["TRACKING_CORE_SLIME"] == "1"
        assert os.environ["PYTHONPATH"] == str(slime_install.BOOTSTRAP_DIR)
    finally:
        verl_install.uninstall()
        slime_install.uninstall()
    assert "PYTHONPATH" not in os.environ and "TRACKING_CORE_SLIME" not in os.environ


@pytest.mark.slow
def test_tracking_built_in_a_ray_actor_is_routed(tmp_path: Path, installed: None) -> None:
    """verl builds its Tracking inside a Ray actor (its TaskRunner): the job's runtime
    environment from ray_runtime_env() routes it there."""
    ray = pytest.importorskip("ray")
    tracking_dir = tmp_path / "tracking-runs"
    runtime_env = verl_install.ray_runtime_env(
        {
            "env_vars": {
                "TRACKING_CORE_DIR": str(tracking_dir),
                "TRACKING_CORE_BACKENDS": "jsonl",
                "TRACKING_CORE_DELIVERY": "thread",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            }
        }
    )
    config = OmegaConf.to_container(verl_config(["console", "tracking_core"]), resolve=True)

    @ray.remote
    class TaskRunner:
        def fit(self, config: dict[str, Any]) -> str:
            from verl.utils.tracking import Tracking

            logger = Tracking("hosts-verl", "in-ray", config["trainer"]["logger"], config)
            for step in range(1, STEPS + 1):
                logger.log(data=metrics_at(step), step=step)
            run_id = str(logger.logger["tracking_core"].run.run_id)
            logger.finish()
            return run_id

    ray.init(num_cpus=1, include_dashboard=False, runtime_env=runtime_env, log_to_driver=False)
    try:
        run_id = ray.get(TaskRunner.remote().fit.remote(config), timeout=240)
    finally:
        ray.shutdown()
    lines = [json.loads(line) for line in (tracking_dir / "jsonl" / run_id / "primary.jsonl").read_text().splitlines()]
    namespaces = {line["namespace"] for line in lines if line.get("type") == "config"}
    assert {"launch", "actor", "rollout", "ref", "critic"} <= namespaces
    metrics = [(m["key"], m["step"]) for m in lines if m.get("type") == "metric"]
    assert sorted(metrics) == sorted((name, step) for step in range(1, STEPS + 1) for name in METRIC_NAMES)
    assert lines[-1]["type"] == "status" and lines[-1]["status"] == "FINISHED"
