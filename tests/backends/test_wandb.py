"""The wandb backend against real W&B offline run files, read back with W&B's own reader.

Everything is written by the real ``wandb`` library (offline, no network, no API key) and read
back with ``wandb leet inspect`` (``tests.helpers.wandb_offline``): config keys, every history row,
``define_metric`` axes, run files, exit state. Planted secrets (a 40-hex ``wandb_key`` in the
config and ``--wandb-key`` on ``sys.argv``, an API key in the environment) must appear in no file
W&B wrote. The multi-process test runs the job as slime does: a driver (primary) with the actor
writing in its process, a critic and a rollout manager attaching from their own processes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tracking_core
from tests.helpers.subprocess_python import JOBS, hiding, run_python
from tests.helpers.wandb_offline import (
    W_VARS,
    OfflineRun,
    count_files,
    find_offline_runs,
    grep_files,
    merged_config,
    offline_env,
    read_job,
    read_offline_runs,
)
from tracking_core import MetricRecord, RunContext
from tracking_core.config import build_section, config_json, job_params
from tracking_core.options import tracking_option_dests

pytest.importorskip("wandb")

SECRET = "0123456789abcdef0123456789abcdef01234567"
ENV_SECRET = "fedcba9876543210fedcba9876543210fedcba98"
STEPS = 6

LAUNCH = {
    "lr": 1e-5,
    "seed": 1234,
    "use_kl_loss": True,
    "advantage_estimator": "ppo",
    "model": {"name": "qwen3-4b", "layers": 36},
    "save": None,
}
ACTOR = {"lr": 1e-6, "micro_batch_size": 2}
CRITIC = {"lr": 1e-5, "micro_batch_size": 4, "num_critic_only_steps": 1}
ROLLOUT = {"rollout_batch_size": 4, "n_samples_per_prompt": 4}


# -- environment ------------------------------------------------------------------------------
@pytest.fixture
def wandb_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in W_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in offline_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    return tmp_path


def assert_no_secret(root: Path, runs: list[OfflineRun], *secrets: str) -> None:
    """No secret in any file under ``root`` (bytes), nor in what W&B's reader decodes (a string
    could straddle a 32 KiB block boundary of the ``.wandb`` log)."""
    assert count_files(root) > 0
    for secret in secrets:
        assert grep_files(root, secret) == [], f"{secret[:6]}... found in W&B's files"
        for run in runs:
            assert secret not in json.dumps(run.records), f"{secret[:6]}... in {run.path}"


def assert_argv_redacted(run: OfflineRun) -> None:
    """W&B did record the command line, with the key's value replaced."""
    args = [e["args"] for e in run.environment if "args" in e]
    assert args, "W&B recorded no command line"
    argv = args[0]
    i = argv.index("--wandb-key")
    assert argv[i + 1].startswith("<redacted"), argv


# -- cheap checks, no W&B run ---------------------------------------------------------------
def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in W_VARS}
    env.update(extra)
    return env


def test_import_does_not_import_wandb() -> None:
    out = run_python(
        JOBS / "wandb_plugin_import.py",
        drop=W_VARS,
    )
    assert out.stdout.split() == ["True", "False"]


def test_missing_wandb_names_the_extra(tmp_path: Path) -> None:
    site = hiding(tmp_path / "hide", "wandb")
    out = run_python(
        JOBS / "wandb_unavailable.py",
        args=[tmp_path],
        site=site,
        drop=W_VARS,
    ).stdout
    assert "ERROR:" in out
    assert 'pip install "tracking-core[wandb]"' in out
    assert "'wandb'" in out


def slime_parser() -> argparse.ArgumentParser:
    """The W&B options slime's own parser defines (names and dests as in slime)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--use-wandb", action="store_true")
    parser.add_argument("--wandb-mode", type=str, default=None)
    parser.add_argument("--wandb-dir", type=str, default=None)
    parser.add_argument("--wandb-key", type=str, default=None)
    parser.add_argument("--wandb-host", type=str, default=None)
    parser.add_argument("--wandb-team", type=str, default=None)
    parser.add_argument("--wandb-group", type=str, default=None)
    parser.add_argument("--wandb-project", type=str, default=None)
    parser.add_argument("--wandb-run-id", type=str, default=None)
    parser.add_argument(
        "--disable-wandb-random-suffix", action="store_false", dest="wandb_random_suffix"
    )
    return parser


def context(tmp: Path, options: dict[str, Any], **kw: Any) -> RunContext:
    return RunContext(
        backend="wandb",
        run_id="20260101-000000-abcdef",
        name="job",
        primary=True,
        tracking_dir=tmp,
        options=options,
        **kw,
    )


def test_options_reuse_slime_flags_and_add_the_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracking_wandb.options import resolve

    for name in W_VARS + ("WANDB_MODE", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    parser = slime_parser()
    host = tracking_core.add_tracking_options(parser)  # no argparse conflict
    assert {"--wandb-project", "--wandb-group", "--wandb-mode", "--wandb-dir"} <= set(host.reused)
    assert {"--wandb-entity", "--wandb-console"} <= set(host.added)
    args = parser.parse_args(
        [
            "--wandb-team",
            "rl-team",
            "--wandb-project",
            "p1",
            "--wandb-mode",
            "offline",
            "--wandb-dir",
            str(tmp_path / "wb"),
            "--wandb-key",
            SECRET,
            "--wandb-group",
            "g",
        ]
    )
    opts = resolve(context(tmp_path, vars(args)))
    assert (opts.entity, opts.project, opts.mode, opts.group) == ("rl-team", "p1", "offline", "g")
    assert opts.root == tmp_path / "wb"
    assert opts.random_suffix is True  # slime's default: a random group suffix
    assert SECRET not in repr(opts)

    bare = argparse.ArgumentParser()
    added = tracking_core.add_tracking_options(bare).added
    assert {
        "--wandb-project",
        "--wandb-entity",
        "--wandb-group",
        "--wandb-mode",
        "--wandb-dir",
    } <= set(added)
    opts = resolve(context(tmp_path, vars(bare.parse_args([]))))
    # No option, no W&B variable, no API key: offline under the tracking directory.
    assert (opts.mode, opts.mode_explicit, opts.root) == ("offline", False, tmp_path)

    monkeypatch.setenv("WANDB_PROJECT", "env-proj")
    monkeypatch.setenv("WANDB_ENTITY", "env-ent")
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "envdir"))
    opts = resolve(context(tmp_path, {}))
    assert (opts.project, opts.entity, opts.mode, opts.root) == (
        "env-proj",
        "env-ent",
        "disabled",
        tmp_path / "envdir",
    )
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_API_KEY", ENV_SECRET)
    assert resolve(context(tmp_path, {"wandb_mode": "online"})).mode == "online"
    monkeypatch.delenv("WANDB_MODE")
    assert resolve(context(tmp_path, {})).mode == "online"  # a key is available


def test_metric_rows_group_by_axis_and_step() -> None:
    from tracking_wandb.rows import metric_rows, new_definitions

    def rec(
        key: str,
        value: float,
        step: int | None,
        step_key: str | None,
        ts: float = 1.0,
        prefix: str = "actor/",
    ) -> MetricRecord:
        return MetricRecord(key, value, step, ts, 0, "actor", prefix, step_key)

    records = [
        rec("train/loss", 0.5, 3, "train/step"),
        rec("train/kl", 0.1, 3, "train/step"),
        rec("train/loss", 0.4, 3, "train/step"),  # same name again: a new row
        rec("train/step", 3.0, 3, "train/step"),  # slime logs the step as a metric too
        rec("eval/acc", 0.9, 1, "eval/step"),
        rec("lr", 1e-6, 7, None),  # a step without a key: the role's "step" axis
        rec("note", 2.0, None, None, ts=2.0),
    ]
    rows = metric_rows(records)
    assert [r.data() for r in rows] == [
        {"actor/train/loss": 0.5, "actor/train/kl": 0.1, "actor/train/step": 3, "_timestamp": 1.0},
        {"actor/train/loss": 0.4, "actor/train/step": 3, "_timestamp": 1.0},
        {"actor/eval/acc": 0.9, "actor/eval/step": 1, "_timestamp": 1.0},
        {"actor/lr": 1e-6, "actor/step": 7, "_timestamp": 1.0},
        {"actor/note": 2.0, "_timestamp": 2.0},
    ]
    axes: set[str] = set()
    defined: dict[str, str] = {}
    new_axes, pairs = new_definitions(rows, axes, defined)
    assert new_axes == ["actor/train/step", "actor/eval/step", "actor/step"]
    assert pairs == [
        ("actor/train/loss", "actor/train/step"),
        ("actor/train/kl", "actor/train/step"),
        ("actor/eval/acc", "actor/eval/step"),
        ("actor/lr", "actor/step"),
    ]
    assert new_definitions(rows, axes, defined) == ([], [])


# -- one process ------------------------------------------------------------------------------
@pytest.mark.parametrize("delivery", ["process", "thread"])
def test_primary_and_actor_in_one_process(
    wandb_env: Path, monkeypatch: pytest.MonkeyPatch, delivery: str
) -> None:
    monkeypatch.setattr(sys, "argv", [sys.argv[0], "--wandb-key", SECRET, "--lr", "1e-5"])
    monkeypatch.setenv("TRACKING_CORE_DELIVERY", delivery)
    tdir = wandb_env / "tracking"
    run = tracking_core.start_run(
        {**LAUNCH, "wandb_key": SECRET},
        backends=["wandb"],
        tracking_dir=tdir,
        options={"wandb_project": "tc-test", "wandb_group": "g1"},
    )
    entry = run.handle.backends["wandb"]
    assert entry["id"] == run.run_id
    assert (entry["mode"], entry["project"], entry["group"]) == ("offline", "tc-test", "g1")
    assert entry["dir"] == str(wandb_env / "wandb-root")
    actor = tracking_core.attach(run.handle, role="actor", writer=True, collect=False, config=ACTOR)
    for step in range(STEPS):
        actor.log_metrics(
            {"train/pg_loss": 1.0 / (step + 1), "train/kl": 0.01 * step},
            step=step,
            step_key="train/step",
        )
        run.log_metrics({"perf/step_time": 2.0 + step}, step=step, step_key="perf/step")
    changed = actor.log_config({**ACTOR, "lr": 2e-6})  # a changed value is recorded, no error
    a = actor.finish()
    p = run.finish()
    for summary in (a, p):
        assert summary.drained
        assert not summary.backends["wandb"]["failures"], summary

    runs = read_job(wandb_env / "wandb-root", run.run_id)
    if delivery == "thread":
        assert len(runs) == 1  # the actor wrote through the driver's run: one directory
    else:  # each writer's delivery process has its own directory of the one run
        assert sorted(r.suffix.split("-r")[0] if r.suffix else "" for r in runs) == ["", "actor"]
    assert {r.run_id for r in runs} == {run.run_id}
    job = next(r for r in runs if not r.suffix)
    actor_job = next(r for r in runs if r.suffix) if delivery == "process" else job
    assert (job.state, job.exit_code) == ("finished", 0)
    config = merged_config(runs)
    assert {k: config[k] for k in ("lr", "seed", "use_kl_loss", "model")} == {
        "lr": 1e-5,
        "seed": 1234,
        "use_kl_loss": True,
        "model": {"name": "qwen3-4b", "layers": 36},
    }
    assert config["actor/lr"] == 2e-6 and config["actor/micro_batch_size"] == 2
    assert config["wandb_key"].startswith("<redacted")
    rows = [h for h in actor_job.history if "actor/train/pg_loss" in h]
    assert [(h["actor/train/step"], h["actor/train/pg_loss"]) for h in rows] == [
        (s, pytest.approx(1.0 / (s + 1))) for s in range(STEPS)
    ]
    perf = [h for h in job.history if "perf/step_time" in h]
    assert [(h["perf/step"], h["perf/step_time"]) for h in perf] == [
        (s, 2 + s) for s in range(STEPS)
    ]
    assert sum(len(r.history) for r in runs) == 2 * STEPS
    for r in runs:
        steps = [h["_step"] for h in r.history]
        assert steps == sorted(steps) == list(range(len(steps)))  # W&B's own step: monotonic
    assert actor_job.metric_definitions["actor/train/kl"]["step_metric"] == "actor/train/step"
    assert job.metric_definitions["perf/step_time"]["step_metric"] == "perf/step"
    assert "tracking-core/config/launch.json" in job.files
    assert "tracking-core/config/actor.json" in actor_job.files
    saved = json.loads((actor_job.path / "files" / "tracking-core/config/actor.json").read_text())
    assert saved == json.loads(config_json(changed))
    assert_argv_redacted(job)
    assert_no_secret(wandb_env, runs, SECRET)


def test_statuses_map_to_exit_codes(wandb_env: Path) -> None:
    failed = tracking_core.start_run(None, backends=["wandb"], tracking_dir=wandb_env / "t")
    failed.log_metrics({"x": 1.0}, step=0, step_key="s")
    failed.finish(status="FAILED")
    # A role writing through the driver's run keeps it open after the driver closed: the run
    # ends when its last user in the process closes, with the driver's status.
    # (Writers share W&B runs within one process when delivery runs on its threads.)
    killed = tracking_core.start_run(
        None, backends=["wandb"], tracking_dir=wandb_env / "t", delivery="thread"
    )
    actor = tracking_core.attach(
        killed.handle, role="actor", writer=True, collect=False, delivery="thread"
    )
    actor.log_metrics({"early": 1.0}, step=0, step_key="train/step")
    assert actor.flush()  # attached (attaching is asynchronous) before the driver closes
    killed.finish(status="KILLED")
    actor.log_metrics({"late": 2.0}, step=1, step_key="train/step")
    assert not actor.finish().backends["wandb"]["failures"]
    dirs = [
        d
        for rid in (failed.run_id, killed.run_id)
        for d in find_offline_runs(wandb_env / "wandb-root", rid)
    ]
    f, k = read_offline_runs(dirs)
    assert (f.exit_code, f.state) == (1, "failed")
    # W&B's own exit hook reports an interrupted process as 255 (see the README).
    assert k.exit_code == 255
    assert [h.get("actor/early", h.get("actor/late")) for h in k.history] == [1, 2]


def test_disabled_mode_logs_nothing_and_never_fails(wandb_env: Path) -> None:
    run = tracking_core.start_run(
        LAUNCH, backends=["wandb"], tracking_dir=wandb_env / "t", options={"wandb_mode": "disabled"}
    )
    assert run.handle.backends["wandb"]["mode"] == "disabled"
    actor = tracking_core.attach(run.handle, role="actor", writer=True, collect=False, config=ACTOR)
    actor.log_metrics({"loss": 1.0}, step=0, step_key="train/step")
    for summary in (actor.finish(), run.finish()):
        assert not summary.backends["wandb"]["failures"]
    assert find_offline_runs(wandb_env / "wandb-root") == []


class FlakyRun:
    """Stands in for a W&B run whose ``log`` fails once, in the middle of a batch."""

    def __init__(self) -> None:
        self.logged: list[dict[str, Any]] = []
        self.defined: list[tuple[str, str | None]] = []
        self.fail_at = 2

    def define_metric(self, name: str, step_metric: str | None = None) -> None:
        self.defined.append((name, step_metric))

    def log(self, data: dict[str, Any]) -> None:
        if len(self.logged) == self.fail_at:
            self.fail_at = -1
            raise ConnectionError("flaky")
        self.logged.append(data)


def test_a_retried_batch_logs_each_row_once(tmp_path: Path) -> None:
    from tracking_wandb.backend import WandbBackend

    from tracking_core.shared_run import SharedRun

    backend = WandbBackend(context(tmp_path, {"wandb_mode": "offline"}))
    flaky = FlakyRun()
    backend.shared = SharedRun(flaky, "k")
    batch = [
        MetricRecord("loss", float(s), s, 1.0 + s, s, None, "", "train/step") for s in range(4)
    ]
    with pytest.raises(ConnectionError):
        backend.log_metrics(batch)
    backend.log_metrics(batch)  # the dispatcher's retry: the same records
    assert [row["train/step"] for row in flaky.logged] == [0, 1, 2, 3]
    assert flaky.defined == [("train/step", None), ("loss", "train/step")]


# -- several processes ------------------------------------------------------------------------
DRIVER = JOBS / "wandb_driver.py"

CHILD = JOBS / "wandb_child.py"


@pytest.mark.slow
@pytest.mark.parametrize("delivery", ["process", "thread"])
def test_driver_actor_critic_rollout_processes(wandb_env: Path, tmp_path: Path, delivery: str) -> None:
    """The driver holds the primary and the actor; the critic and the rollout manager are child
    processes (which deliver from their own delivery processes either way)."""
    env = base_env(
        **offline_env(tmp_path),
        PLANTED=SECRET,
        WANDB_API_KEY=ENV_SECRET,  # a credential in the environment is never logged
        TEST_CONFIGS=json.dumps(
            {"launch": LAUNCH, "actor": ACTOR, "critic": CRITIC, "rollout": ROLLOUT}
        ),
        TEST_TDIR=str(tmp_path / "tracking"),
        TEST_CHILD=str(CHILD),
        TEST_STEPS=str(STEPS),
        DRIVER_DELIVERY=delivery,
    )
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "--wandb-key", SECRET],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=Path.cwd(),
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["codes"] == [0, 0]
    # With delivery on the driver's threads its W&B service is in its environment, and the
    # children had to drop it; a driver delivering from a helper process never runs W&B itself.
    assert result["inherited_service"] == (delivery == "thread")
    assert result["failures"] == [{}, {}]

    rid = result["run_id"]
    runs = read_job(tmp_path / "wandb-root", rid)
    by_role = {r.suffix.split("-r")[0] if r.suffix else "primary": r for r in runs}
    roles = ["critic", "primary", "rollout"] if delivery == "thread" else ["actor", "critic", "primary", "rollout"]
    assert sorted(by_role) == roles, [r.path.name for r in runs]
    assert {r.run_id for r in runs} == {rid}  # one run id: one run once synced

    primary, critic, rollout = by_role["primary"], by_role["critic"], by_role["rollout"]
    assert (primary.state, primary.exit_code) == ("finished", 0)
    # Each writer's own config...
    assert critic.config["critic/lr"] == 1e-5 and "lr" not in critic.config
    assert rollout.config["rollout/rollout_batch_size"] == 4
    # ...and every role's keys in the primary's config too (folded in when it closed).
    assert primary.config["actor/lr"] == 2e-6
    assert primary.config["critic/lr"] == 1e-5
    assert primary.config["critic/num_critic_only_steps"] == 1
    assert primary.config["rollout/n_samples_per_prompt"] == 4
    config = merged_config(runs)  # no key differs between directories
    expected = job_params(build_section(LAUNCH, None), tracking_option_dests()).params  # no null
    assert {k: config[k] for k in expected} == expected
    assert config["actor/micro_batch_size"] == 2 and config["critic/micro_batch_size"] == 4

    # Every history row, exactly once, on its axis.
    actor_run = by_role["primary" if delivery == "thread" else "actor"]
    actor_rows = [h for h in actor_run.history if "actor/train/pg_loss" in h]
    assert [h["actor/train/step"] for h in actor_rows] == list(range(STEPS))
    assert len(actor_run.history) == STEPS
    assert [(h["critic/train/step"], h["critic/train/value_loss"]) for h in critic.history] == [
        (s, pytest.approx(0.5 / (s + 1))) for s in range(STEPS)
    ]
    assert [(h["rollout/step"], h["rollout/raw_reward"]) for h in rollout.history] == [
        (s, pytest.approx(0.1 * s)) for s in range(STEPS)
    ]
    assert critic.metric_definitions["critic/train/value_loss"]["step_metric"] == (
        "critic/train/step"
    )
    assert rollout.metric_definitions["rollout/raw_reward"]["step_metric"] == "rollout/step"
    assert "tracking-core/config/critic.json" in critic.files
    assert "tracking-core/config/rollout.json" in rollout.files

    assert_argv_redacted(primary)
    for run in (critic, rollout):  # x_primary=False: a role's directory has no run metadata
        assert not [e for e in run.environment if "args" in e]
    assert_no_secret(tmp_path, runs, SECRET, ENV_SECRET)
