"""The tensorboard backend against real tensorboardX files, read back with TensorBoard's reader.

Every check reads what TensorBoard itself would show (``tests.helpers.tb_events``): scalars per
role run and step, each namespace's hparams session and config text, the HParams dashboard's
columns, and the session status. The critic writes from a second process, as in a real job.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tracking_tensorboardx.hparams import session_hparams, tensorboard_hparams

import tracking_core
from tests.helpers.subprocess_python import JOBS, hiding, run_python
from tests.helpers.tb_events import hparams_dashboard, read_logdir, read_run
from tracking_core.config import build_section, config_text

pytest.importorskip("tensorboardX")
pytest.importorskip("tensorboard")

SECRET = "hf_" + "q" * 34

LAUNCH = {
    "lr": 1e-5,
    "seed": 1234,
    "use_kl_loss": True,
    "advantage_estimator": "ppo",
    "hf_token": SECRET,
    "model": {"name": "qwen3-4b", "layers": 36},
    "save": None,
}
ACTOR = {"lr": 1e-6, "micro_batch_size": 2, "role_kind": "policy"}
CRITIC = {"lr": 5e-6, "micro_batch_size": 4, "num_critic_only_steps": 1}

CRITIC_SCRIPT = JOBS / "tensorboard_critic.py"


def f32(values: list[float]) -> list[float]:
    """What TensorBoard gives back for values logged as Python floats."""
    return [float(np.float32(v)) for v in values]


def as_hparams(values: dict[str, Any]) -> dict[str, Any]:
    """HParams store every number as a double."""
    return {
        k: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        for k, v in values.items()
    }


# run handle, backend selection and log directory: none inherited from this process
DROP = ("TRACKING_CORE_RUN", "TRACKING_CORE_BACKENDS", "TENSORBOARD_DIR")


@pytest.fixture(autouse=True)
def _no_inherited_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in DROP:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.integration
def test_primary_actor_and_critic_process_read_back(tmp_path: Path) -> None:
    run = tracking_core.start_run(backends=["tensorboard"], tracking_dir=tmp_path, export=False)
    launch = run.log_config(LAUNCH)
    logdir = Path(run.handle.backends["tensorboard"]["logdir"])
    assert logdir == tmp_path.absolute() / "tensorboard" / run.run_id

    rewards = [0.1 * s for s in range(4)]
    for step, reward in enumerate(rewards):
        run.log_metrics({"rollout/raw_reward": reward}, step=step, step_key="rollout/step")

    actor = tracking_core.attach(run.handle, role="actor", writer=True, collect=False)
    actor_section = actor.log_config(ACTOR)
    losses = [1.0 / (s + 1) for s in range(10)]
    for step, loss in enumerate(losses):
        actor.log_metrics(
            {"train/pg_loss": loss, "train/step": step}, step=step, step_key="train/step"
        )

    critic = run_python(
        CRITIC_SCRIPT,
        env={"TRACKING_CORE_RUN": run.handle.to_json(), "CRITIC_CONFIG": json.dumps(CRITIC)},
        drop=DROP,
    )
    critic_out = json.loads(critic.stdout.strip().splitlines()[-1])
    assert critic_out["delivered"] == 7

    assert actor.finish().backends["tensorboard"]["delivered"] == 20
    assert run.finish().backends["tensorboard"]["delivered"] == 4

    runs = read_logdir(logdir)
    assert set(runs) == {"launch", "actor", "critic"}

    # Scalars: unprefixed tags in each role's run, every step once, float32 on disk.
    assert runs["launch"].scalars == {
        "rollout/raw_reward": list(zip(range(4), f32(rewards), strict=True))
    }
    assert runs["actor"].scalars == {
        "train/pg_loss": list(zip(range(10), f32(losses), strict=True)),
        "train/step": [(s, float(s)) for s in range(10)],
    }
    assert runs["critic"].scalars == {
        "train/critic-value_loss": [(s, float(np.float32(1.0 / (s + 3)))) for s in range(7)]
    }

    # HParams: one session per role run, holding that namespace's scalar params under their
    # unprefixed keys (the run names the role), so one column holds every role's value.
    launch_hparams, left_out = tensorboard_hparams(launch)
    # "save" is null: no param at all (config/launch.json and the text keep it)
    assert {k.split(":")[0] for k in left_out} == {"model"} and "save" not in launch.params
    assert runs["launch"].hparams == as_hparams(launch_hparams)
    assert runs["launch"].hparams["seed"] == 1234.0
    assert runs["launch"].hparams["use_kl_loss"] is True
    assert runs["actor"].hparams == as_hparams(session_hparams(actor_section)[0])
    assert runs["critic"].hparams == as_hparams(critic_out["hparams"])
    assert {role: runs[role].hparams["lr"] for role in ("launch", "actor", "critic")} == {
        "launch": 1e-5,
        "actor": 1e-6,
        "critic": 5e-6,
    }
    assert runs["actor"].hparams["micro_batch_size"] == 2.0
    assert runs["critic"].hparams["micro_batch_size"] == 4.0
    assert not [k for run in runs.values() for k in run.hparams if k.startswith(("actor/", "critic/"))]

    # The full config of each namespace as text, nested and null values included.
    assert runs["launch"].text == {"config/launch": [config_text(launch)]}
    assert '"qwen3-4b"' in runs["launch"].text["config/launch"][0]
    assert runs["actor"].text == {"config/actor": [config_text(actor_section)]}
    assert runs["critic"].text == {"config/critic": [critic_out["text"]]}

    # What the HParams dashboard offers: every role's columns, every role's scalars as metrics.
    view = hparams_dashboard(logdir)
    assert not view.from_experiment_tag
    expected_columns = (
        set(launch_hparams) | set(runs["actor"].hparams) | set(runs["critic"].hparams)
    )
    assert set(view.hparams) == expected_columns
    assert expected_columns == set(LAUNCH) - {"model", "save"} | set(ACTOR) | set(CRITIC)
    assert {
        ("rollout/raw_reward", ""),
        ("train/pg_loss", ""),
        ("train/critic-value_loss", ""),
    } <= set(view.metrics)

    assert {r.session_status for r in runs.values()} == {"STATUS_SUCCESS"}

    # The redacted secret never reaches an event file.
    for path in logdir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def _raw_session_hparams(run_dir: Path) -> dict[str, Any]:
    """The hparams of a run's session start info, parsed from the event files' hparams plugin
    data with TensorBoard's own reader and the hparams plugin's metadata parser."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata as hp_metadata

    acc = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    acc.Reload()
    content = acc.PluginTagToContent(hp_metadata.PLUGIN_NAME)
    start = hp_metadata.parse_session_start_info_plugin_data(
        content[hp_metadata.SESSION_START_INFO_TAG]
    )
    return {name: value.number_value for name, value in start.hparams.items()}


def _dashboard_column(logdir: Path, name: str) -> Any:
    """The HParams dashboard's column ``name`` (``api_pb2.HParamInfo``) as its backend builds it."""
    from tensorboard import context as tb_context
    from tensorboard.backend.event_processing import data_provider
    from tensorboard.backend.event_processing import plugin_event_multiplexer as pem
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import backend_context

    mux = pem.EventMultiplexer(tensor_size_guidance={}, purge_orphaned_data=True)
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(logdir))
    context = backend_context.Context(
        base_plugin.TBContext(data_provider=provider, logdir=str(logdir), multiplexer=mux)
    )
    ctx = tb_context.RequestContext()
    experiment = context.experiment_from_metadata(
        ctx,
        "",
        include_metrics=False,
        hparams_run_to_tag_to_content=context.hparams_metadata(ctx, ""),
        data_provider_hparams=context.hparams_from_data_provider(ctx, "", limit=None),
    )
    (info,) = [i for i in experiment.hparam_infos if i.name == name]
    return info


@pytest.mark.integration
@pytest.mark.parametrize("key_style", ["default", "slime"])
def test_roles_share_unprefixed_hparams_columns(tmp_path: Path, key_style: str) -> None:
    """The actor's and the critic's sessions both name their learning rate ``lr``: one
    dashboard column compares them. The config text keeps each namespace's own keys."""
    run = tracking_core.start_run(
        {"lr": 3e-6, "seed": 1},
        backends=["tensorboard"],
        tracking_dir=tmp_path,
        key_style=key_style,
        export=False,
    )
    actor = tracking_core.attach(run.handle, role="actor", writer=True, collect=False)
    critic = tracking_core.attach(run.handle, role="critic", writer=True, collect=False)
    actor_section = actor.log_config({"lr": 1e-6, "micro_batch_size": 2})
    critic_section = critic.log_config({"lr": 1e-5, "num_critic_only_steps": 1})
    for step in range(2):
        actor.log_metrics({"train/pg_loss": 0.5 / (step + 1)}, step=step, step_key="train/step")
        critic.log_metrics({"train/critic-value_loss": 1.0 / (step + 1)}, step=step)
    for r in (actor, critic, run):
        r.finish()
    logdir = Path(run.handle.backends["tensorboard"]["logdir"])

    actor_hp = _raw_session_hparams(logdir / "actor")
    critic_hp = _raw_session_hparams(logdir / "critic")
    assert (actor_hp["lr"], critic_hp["lr"]) == (1e-6, 1e-5)
    assert set(actor_hp) == {"lr", "micro_batch_size"}
    assert set(critic_hp) == {"lr", "num_critic_only_steps"}
    column = _dashboard_column(logdir, "lr")
    assert column.differs
    if key_style == "default":
        # the launch session keeps its own (unprefixed) keys and shares the column too
        assert _raw_session_hparams(logdir / "launch") == {"lr": 3e-6, "seed": 1.0}
    else:  # slime's style: the launch config goes only to its text and JSON artifact
        assert read_run(logdir / "launch").hparams == {}
    assert (column.domain_interval.min_value, column.domain_interval.max_value) == (1e-6, 1e-5)

    # Lossless: each namespace's text still names its keys as the other trackers do.
    runs = read_logdir(logdir)
    assert runs["actor"].text["config/actor"] == [config_text(actor_section)]
    assert runs["critic"].text["config/critic"] == [config_text(critic_section)]
    assert "| `critic/lr` | `1e-05` |" in runs["critic"].text["config/critic"][0]
    actor_key = "lr" if key_style == "slime" else "actor/lr"
    assert f"| `{actor_key}` | `1e-06` |" in runs["actor"].text["config/actor"][0]


def _role_config(lr: float, batch: int, rank: int, port: str, run_id: str, host: str) -> dict[str, Any]:
    """A role's effective config as a launcher leaves it: the job's settings beside per-launch
    values that differ between any two processes, several named to sort ahead of ``lr``."""
    return {
        "lr": lr,
        "micro_batch_size": batch,
        "advantage_estimator": "ppo",
        "actor_ranks": 2,
        "env/OMP_NUM_THREADS": "1",
        "parallel/rank": rank,
        "env/MASTER_PORT": port,
        "env/TORCHELASTIC_RUN_ID": run_id,
        "MASTER_ADDR": f"10.0.0.{rank + 1}",
        "parallel/host": host,
        "HOSTNAME": host,
        "collector_pid": 1000 + rank,
        "dist_init_timestamp": 1_700_000_000 + rank,
    }


PER_LAUNCH = {
    "env/MASTER_PORT", "env/TORCHELASTIC_RUN_ID", "MASTER_ADDR", "parallel/host", "HOSTNAME",
    "collector_pid", "dist_init_timestamp",
}


@pytest.mark.integration
def test_hparams_open_on_what_differs_between_roles(tmp_path: Path) -> None:
    """The dashboard's first columns are the keys whose values differ between the roles, ``lr``
    among those it shows when it opens; per-launch values (ports, run ids, pids, hosts,
    timestamps: the rule of ``tracking-core diff``) are no column at all, and stay in the config
    text. The critic's config arrives after the actor's: the order follows without a rewrite."""
    run = tracking_core.start_run(
        {"lr": 1e-6, "advantage_estimator": "ppo", "MASTER_PORT": "29400"},
        backends=["tensorboard"], tracking_dir=tmp_path, export=False,
    )
    logdir = Path(run.handle.backends["tensorboard"]["logdir"])
    actor = tracking_core.attach(run.handle, role="actor", writer=True, collect=False)
    actor.log_config(_role_config(1e-6, 2, 0, "29501", "9f84-a", "node-a"))
    actor.log_metrics({"train/pg_loss": 0.5}, step=0, step_key="train/step")
    assert actor.flush(30) and run.flush(30)
    # Launch and actor agree on lr: nothing differs yet, and no per-launch value is a column.
    early = hparams_dashboard(logdir)
    assert early.differ == [] and not PER_LAUNCH & set(early.columns), early.columns

    critic = tracking_core.attach(run.handle, role="critic", writer=True, collect=False)
    critic_section = critic.log_config(_role_config(1e-5, 4, 1, "36943", "7007-b", "node-b"))
    critic.log_metrics({"train/value_loss": 1.0}, step=0, step_key="train/step")
    for r in (actor, critic, run):
        r.finish()

    view = hparams_dashboard(logdir)
    assert view.differ == ["lr", "micro_batch_size", "parallel/rank"], view.columns
    assert view.displayed[:3] == ["lr", "micro_batch_size", "parallel/rank"], view.columns
    assert not PER_LAUNCH & set(view.columns) and "MASTER_PORT" not in view.columns
    assert {"advantage_estimator", "actor_ranks", "env/OMP_NUM_THREADS"} <= set(view.columns)
    # Still data: each role's config text holds its per-launch values.
    critic_text = read_run(logdir / "critic").text["config/critic"][0]
    assert critic_text == config_text(critic_section)
    assert "| `critic/env/MASTER_PORT` | `\"36943\"` |" in critic_text
    assert "| `critic/parallel/host` | `\"node-b\"` |" in critic_text
    left_out = tensorboard_hparams(critic_section)[1]
    assert {item.split(": ", 1)[0] for item in left_out} == {f"critic/{k}" for k in PER_LAUNCH}


@pytest.mark.integration
def test_steps_axes_and_durability(tmp_path: Path) -> None:
    """Each series keeps its own steps (records of several axes interleave out of order); a
    record without a step continues its tag's series; acknowledged data is on disk."""
    run = tracking_core.start_run(
        backends=["tensorboard"], tracking_dir=tmp_path, name="ppo-steps", export=False
    )
    logdir = Path(run.handle.backends["tensorboard"]["logdir"])
    assert logdir.name == "ppo-steps"
    run.log_metrics({"train/loss": 0.5}, step=10, step_key="train/step")
    run.log_metrics({"rollout/reward": 1.0}, step=2, step_key="rollout/step")
    run.log_metrics({"train/loss": 0.25}, step=11, step_key="train/step")
    run.log_metrics({"rollout/reward": 2.0}, step=3, step_key="rollout/step")
    run.log_metrics({"eval/acc": 0.5})
    run.log_metrics({"eval/acc": 0.75})
    run.log_metrics({"train/loss": 0.125})  # no step: one past the tag's last step
    assert run.flush(timeout=30)

    # Flushed = acknowledged = readable from disk while the run is still open.
    live = read_run(logdir / "launch")
    assert live.scalars == {
        "train/loss": [(10, 0.5), (11, 0.25), (12, 0.125)],
        "rollout/reward": [(2, 1.0), (3, 2.0)],
        "eval/acc": [(0, 0.5), (1, 0.75)],
    }
    assert live.session_status is None

    run.finish(status="FAILED")
    assert read_run(logdir / "launch").session_status is None  # no config, no session

    # A second job with the same name does not interleave with the first one's curves.
    again = tracking_core.start_run(
        {"lr": 0.1}, backends=["tensorboard"], tracking_dir=tmp_path, name="ppo-steps", export=False
    )
    other = Path(again.handle.backends["tensorboard"]["logdir"])
    assert other == logdir.parent / f"ppo-steps-{again.run_id}"
    again.finish(status="KILLED")
    assert read_run(other / "launch").session_status == "STATUS_FAILURE"


@pytest.mark.integration
def test_resume_appends_to_the_same_runs(tmp_path: Path) -> None:
    """A resumed primary writes on into the same TensorBoard runs. HParams keep the first
    session's values (TensorBoard reads only the first session start of a run); a changed
    value is recorded as a new version of the config text."""
    run = tracking_core.start_run(
        {"lr": 0.1}, backends=["tensorboard"], tracking_dir=tmp_path, export=False
    )
    run.log_metrics({"train/loss": 1.0}, step=0)
    run.finish()
    resumed = tracking_core.start_run(
        {"lr": 0.2}, handle=run.handle.to_json(), tracking_dir=tmp_path, export=False
    )
    assert resumed.handle.backends["tensorboard"] == run.handle.backends["tensorboard"]
    resumed.log_metrics({"train/loss": 0.5}, step=1)
    resumed.finish()
    runs = read_logdir(run.handle.backends["tensorboard"]["logdir"])
    assert set(runs) == {"launch"}
    launch = runs["launch"]
    assert launch.scalars == {"train/loss": [(0, 1.0), (1, 0.5)]}
    assert launch.hparams == {"lr": 0.1}
    assert launch.text == {
        "config/launch": [config_text(build_section({"lr": lr}, None)) for lr in (0.1, 0.2)]
    }


def test_log_dir_option_env_and_host_reuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    host = tracking_core.add_tracking_options(parser)
    assert "--tensorboard-dir" in host.added
    explicit = tmp_path / "explicit"
    args = parser.parse_args(
        ["--tensorboard-dir", str(explicit), "--tracking-backends", "tensorboard"]
    )
    run = tracking_core.start_run(args=args, tracking_dir=tmp_path, export=False)
    assert run.handle.backends["tensorboard"]["logdir"] == str(explicit)
    run.finish()
    assert read_logdir(explicit)["launch"].hparams["tracking/tensorboard_dir"] == str(explicit)

    # Megatron (and slime) define --tensorboard-dir already: theirs is reused, not redefined.
    megatron = argparse.ArgumentParser()
    megatron.add_argument("--tensorboard-dir", type=str, default=None)
    host = tracking_core.add_tracking_options(megatron)
    assert "--tensorboard-dir" in host.reused

    # slime's TENSORBOARD_DIR when no option names a directory.
    from_env = tmp_path / "from-env"
    monkeypatch.setenv("TENSORBOARD_DIR", str(from_env))
    run = tracking_core.start_run(backends=["tensorboard"], tracking_dir=tmp_path, export=False)
    assert run.handle.backends["tensorboard"]["logdir"] == str(from_env)
    run.finish()


def test_plugin_import_is_cheap(tmp_path: Path) -> None:
    result = run_python(JOBS / "tensorboard_plugin_import.py", drop=DROP)
    assert result.stdout.strip() == "ok"


def test_missing_tensorboardx_names_the_extra(tmp_path: Path) -> None:
    site = hiding(tmp_path / "site", "tensorboardX")
    result = run_python(JOBS / "tensorboard_unavailable.py", args=[tmp_path], site=site, drop=DROP)
    assert 'pip install "tracking-core[tensorboard]"' in result.stdout
    assert "tensorboardX" in result.stdout
