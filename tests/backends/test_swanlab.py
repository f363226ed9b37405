"""The swanlab backend against real SwanLab offline run directories, read back with SwanLab's own
record reader (the ``DataStoreReader`` and ``Record`` protobuf its ``swanlab sync`` reads with, and
its ``revert_config`` for ``config.yaml``).

The multi-process test runs one job as slime does: a driver (primary) and two role writers (actor,
critic) in their own processes, each delivering from its own delivery process. SwanLab keeps one
run directory per writing process, all under the job's run id: one experiment once synced.
Planted secrets (an ``hf_`` token in a config value, ``--swanlab-api-key`` on the command line,
``SWANLAB_API_KEY`` in the environment) must appear in no file SwanLab wrote.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import tracking_core
from tests.helpers.subprocess_python import JOBS, run_python
from tracking_core import RunContext

pytest.importorskip("swanlab")

S_VARS = (
    "SWANLAB_MODE",
    "SWANLAB_LOG_DIR",
    "SWANLAB_API_KEY",
    "SWANLAB_PROJ_NAME",
    "SWANLAB_PROJECT_NAME",
    "SWANLAB_WORKSPACE",
    "SWANLAB_EXP_NAME",
    "SWANLAB_API_HOST",
    "SWANLAB_RUN_ID",
    "SWANLAB_RESUME",
    "SWANLAB_TERMINAL_PROXY_TYPE",
    "TRACKING_CORE_RUN",
    "TRACKING_CORE_BACKENDS",
)
HF_TOKEN = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm1234567890"
API_KEY = "swlb-3f9a1c77d2e04b5ab8c6e1f0a2d4c6e8"
CLI_KEY = "swlb-cli-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
STEPS = 5
LAUNCH = {"lr": 3e-6, "seed": 7, "use_kl_loss": True, "save": None, "hub_note": HF_TOKEN}
ACTOR = {"lr": 1e-6, "micro_batch_size": 2}
CRITIC = {"lr": 1e-5, "micro_batch_size": 4, "num_critic_only_steps": 1}


# -- SwanLab's own reader ---------------------------------------------------------------------
@dataclass
class SwanRun:
    """One SwanLab run directory, as SwanLab's sync reads it."""

    path: Path
    start: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    scalars: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    x_axes: dict[str, str] = field(default_factory=dict)
    saves: list[str] = field(default_factory=list)
    media: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    state: str | None = None

    @property
    def label(self) -> str:
        return self.path.name.split(f"-{self.start['id']}-", 1)[1]


def read_run_dir(path: Path) -> SwanRun:
    import yaml
    from google.protobuf.json_format import MessageToDict
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.proto.swanlab.run.v1.run_pb2 import RunState
    from swanlab.sdk.internal.core_python.store import DataStoreReader
    from swanlab.sdk.internal.run.components.config import revert_config

    (record_file,) = path.glob("*.swanlab")
    out = SwanRun(path)
    reader = DataStoreReader()
    reader.open(record_file)
    try:
        for raw in reader:
            rec = Record()
            rec.ParseFromString(raw)
            kind = rec.WhichOneof("record_type")
            if kind == "start":
                out.start = MessageToDict(rec.start, preserving_proto_field_name=True)
            elif kind == "scalar":
                out.scalars.setdefault(rec.scalar.key, []).append(
                    (int(rec.scalar.step), rec.scalar.value.number)
                )
            elif kind == "column" and rec.column.x_axis:
                out.x_axes[rec.column.column_key] = rec.column.x_axis
            elif kind == "media":
                out.media.setdefault(rec.media.key, []).append(
                    MessageToDict(rec.media, preserving_proto_field_name=True)
                )
            elif kind == "save":
                out.saves.append(rec.save.name)
            elif kind == "finish":
                out.state = RunState.Name(rec.finish.state)
    finally:
        reader.close()
    config_file = path / "files" / "config.yaml"
    if config_file.exists():
        out.config = revert_config(yaml.safe_load(config_file.read_text()) or {})
    return out


def read_job(log_dir: Path, run_id: str) -> list[SwanRun]:
    """Every run directory of the job (``run-<time>-<id>-<label>``) under ``log_dir``."""
    return [read_run_dir(p) for p in sorted(log_dir.glob(f"run-*-{run_id}-*")) if p.is_dir()]


def by_label(runs: list[SwanRun]) -> dict[str, SwanRun]:
    return {r.label.split("-")[0]: r for r in runs}


def grep_files(root: Path, needle: str) -> list[Path]:
    data = needle.encode()
    return [p for p in root.rglob("*") if p.is_file() and data in p.read_bytes()]


@pytest.fixture
def swan_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in S_VARS:
        monkeypatch.delenv(name, raising=False)


def context(tmp: Path, options: dict[str, Any] | None = None) -> RunContext:
    return RunContext(
        backend="swanlab", run_id="20260101-000000-abcdef", name="ppo", primary=True,
        tracking_dir=tmp / "td", options=options or {},
    )


# -- options, no SwanLab run ------------------------------------------------------------------
def test_options_modes_and_targets(
    swan_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracking_swanlab.options import resolve, sync_commands, target

    monkeypatch.setenv("SWANLAB_ROOT", str(tmp_path / "no-login"))  # no netrc from `swanlab login`
    monkeypatch.chdir(tmp_path)
    opts = resolve(context(tmp_path))
    # No option, no variable, no API key: offline, under the tracking directory.
    assert (opts.mode, opts.mode_explicit) == ("offline", False)
    assert opts.log_dir == (tmp_path / "td" / "swanlab").absolute()
    monkeypatch.setenv("SWANLAB_API_KEY", API_KEY)
    assert resolve(context(tmp_path)).mode == "online"  # a key: SwanLab's cloud
    assert resolve(context(tmp_path, {"swanlab_mode": "offline"})).mode == "offline"
    monkeypatch.setenv("SWANLAB_MODE", "local")
    monkeypatch.setenv("SWANLAB_LOG_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("SWANLAB_PROJ_NAME", "rl-proj")
    opts = resolve(context(tmp_path, {"swanlab_api_key": CLI_KEY}))
    assert (opts.mode, opts.log_dir, opts.project) == ("local", tmp_path / "elsewhere", "rl-proj")
    assert CLI_KEY not in repr(opts)
    assert resolve(context(tmp_path, {"swanlab_mode": "cloud"})).mode == "online"
    with pytest.raises(ValueError, match="unknown SwanLab mode 'sky'"):
        resolve(context(tmp_path, {"swanlab_mode": "sky"}))
    with pytest.raises(ValueError, match="SwanLab project name"):
        resolve(context(tmp_path, {"swanlab_project": "a b/c"}))
    where = target(context(tmp_path, {"swanlab_api_key": CLI_KEY}))
    assert where == {
        "id": "20260101-000000-abcdef", "project": "rl-proj", "workspace": None, "name": "ppo",
        "mode": "local", "log_dir": str(tmp_path / "elsewhere"),
    }
    assert API_KEY not in json.dumps(where) and CLI_KEY not in json.dumps(where)

    # The sync commands put the primary's directory last.
    for label in ("primary-p1", "actor-r0-p2", "critic-r0-p3"):
        (tmp_path / "logs" / f"run-20260101_000000-job-1-{label}").mkdir(parents=True)
    commands = sync_commands(tmp_path / "logs", "job-1")
    assert [c.split("job-1-")[-1].split("-")[0] for c in commands] == ["actor", "critic", "primary"]
    assert all(c.startswith("swanlab sync --id job-1 ") for c in commands)


def test_plugins_list_options_and_targets_import_no_tracker(tmp_path: Path) -> None:
    out = run_python(
        JOBS / "swanlab_plugins.py",
        args=[tmp_path / "td", CLI_KEY],
        env={"SWANLAB_API_KEY": API_KEY, "SWANLAB_ROOT": str(tmp_path / "no-login")},
        drop=S_VARS,
    ).stdout
    text = out.strip().splitlines()[-1]
    assert API_KEY not in text and CLI_KEY not in text
    doc = json.loads(text)
    td = str((tmp_path / "td").absolute())
    assert doc["targets"]["swanlab"] == {  # a key was found: cloud; the key itself is not there
        "id": "job-1", "project": "tc", "workspace": None, "name": "ppo", "mode": "online",
        "log_dir": f"{td}/swanlab",
    }
    assert doc["targets"]["trackio"] == {
        "project": "tracking-core", "run": "ppo", "run_id": "job-1", "group": None, "dir": f"{td}/trackio",
    }
    assert doc["targets"]["console"] == {"stream": "stderr"}
    assert {"swanlab", "trackio", "console"} <= set(doc["listed"])
    assert {"--swanlab-mode", "--swanlab-log-dir", "--swanlab-api-key", "--trackio-project",
            "--trackio-dir", "--console-interval"} <= set(doc["added"])
    assert doc["heavy"] == []


# -- one job, three processes -------------------------------------------------------------------
DRIVER = JOBS / "swanlab_driver.py"

CHILD = JOBS / "tracker_role_writer.py"


@pytest.mark.slow
@pytest.mark.integration
def test_driver_and_two_role_writers_one_experiment(swan_env: None, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in S_VARS}
    env.update(
        TEST_CONFIGS=json.dumps({"launch": LAUNCH, "actor": ACTOR, "critic": CRITIC}),
        TEST_TDIR=str(tmp_path / "tracking"),
        TEST_CHILD=str(CHILD),
        TEST_STEPS=str(STEPS),
        CLI_KEY=CLI_KEY,
        SWANLAB_API_KEY=API_KEY,  # a credential in the environment: used to log in, never logged
        SWANLAB_ROOT=str(tmp_path / "swanlab-root"),
    )
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "--swanlab-api-key", CLI_KEY, "--lr", "3e-6"],
        capture_output=True, text=True, env=env, timeout=240, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["codes"] == [0, 0] and result["failures"] == {}
    rid = result["run_id"]
    log_dir = tmp_path / "tracking" / "swanlab"
    assert result["entry"]["log_dir"] == str(log_dir) and result["entry"]["mode"] == "offline"

    runs = read_job(log_dir, rid)
    roles = by_label(runs)
    assert sorted(roles) == ["actor", "critic", "primary"], [r.path.name for r in runs]
    assert {r.start["id"] for r in runs} == {rid}  # one run id: one experiment once synced
    assert {r.start["project"] for r in runs} == {"tc-test"}
    primary, actor, critic = roles["primary"], roles["actor"], roles["critic"]
    assert all(r.state == "RUN_STATE_FINISHED" for r in runs)

    # Configs: the launch config unprefixed, each role's under <role>/, all in the primary's.
    config = primary.config
    assert {k: config[k] for k in ("lr", "seed", "use_kl_loss")} == {"lr": 3e-6, "seed": 7, "use_kl_loss": True}
    assert "save" not in config  # a null value is no param (the config text keeps it)
    assert config["hub_note"].startswith("<redacted")
    assert (config["actor/lr"], config["actor/micro_batch_size"]) == (1e-6, 2)
    assert (config["critic/lr"], config["critic/num_critic_only_steps"]) == (1e-5, 1)
    assert actor.config == {"actor/lr": 1e-6, "actor/micro_batch_size": 2}
    assert critic.config["critic/micro_batch_size"] == 4 and "lr" not in critic.config
    assert "tracking-core/config/launch.json" in primary.saves
    assert "tracking-core/config/critic.json" in critic.saves
    saved = json.loads((actor.path / "files" / "tracking-core" / "config" / "actor.json").read_text())
    assert saved["values"] == ACTOR and saved["prefix"] == "actor/"

    # Metrics: every role's every step, on its own axis.
    for run, scale in ((actor, 1.0), (critic, 0.5)):
        role = run.label.split("-")[0]
        points = run.scalars[f"{role}/train/loss"]
        assert [s for s, _ in points] == list(range(STEPS))
        assert all(math.isclose(v, scale / (s + 1)) for s, v in points)
        assert run.scalars[f"{role}/train/step"] == [(s, float(s)) for s in range(STEPS)]
        assert run.x_axes[f"{role}/train/kl"] == f"{role}/train/step"
    assert primary.scalars["perf/step_time"] == [(s, 2.0 + s) for s in range(STEPS)]

    # The command line SwanLab recorded is the redacted one; no secret in any file.
    meta = json.loads((primary.path / "files" / "swanlab-metadata.json").read_text())
    command = meta["runtime"]["command"]
    assert "--swanlab-api-key <redacted" in command and "--lr 3e-6" in command
    for secret in (HF_TOKEN, API_KEY, CLI_KEY):
        assert grep_files(tmp_path / "tracking", secret) == [], secret[:8]


@pytest.mark.integration
@pytest.mark.parametrize(("status", "state"), [("FAILED", "RUN_STATE_CRASHED"), ("KILLED", "RUN_STATE_ABORTED")])
def test_statuses_map_to_swanlab_states(swan_env: None, tmp_path: Path, status: str, state: str) -> None:
    run = tracking_core.start_run(
        {"lr": 1.0}, backends=["swanlab"], tracking_dir=tmp_path, options={"swanlab_mode": "offline"},
        delivery="thread", export=False,
    )
    actor = tracking_core.attach(run.handle, role="actor", writer=True, collect=False, delivery="thread")
    actor.log_metrics({"loss": 1.0}, step=0, step_key="train/step")
    assert actor.flush()  # attached through the driver's run (one SwanLab run per process)
    actor.finish()
    run.finish(status=status)
    (only,) = read_job(tmp_path / "swanlab", run.run_id)
    assert only.state == state
    assert only.scalars["actor/loss"] == [(0, 1.0)]


# -- the rich kinds -----------------------------------------------------------------------------
SAMPLES = [
    {"prompt": "What is 2*3?", "response": "<think>2*3</think> 6", "reward": 1.0, "ok": True, "note": None},
    {"prompt": "Say hi", "response": f"hi, my token is {HF_TOKEN}", "reward": -0.5, "ok": False, "note": "x"},
]
VALUES = [0.1, 0.4, 0.4, 0.9, 1.5, 2.0, 2.0, 2.0, 3.7, 4.0]


def media_json(run: SwanRun, key: str, folder: str) -> Any:
    (item,) = [i for m in run.media[key] for i in m["value"]["items"]]
    return (run.path / "media" / folder / item["filename"]).read_text()


@pytest.mark.integration
def test_tables_histograms_texts_and_artifacts_are_swanlab_media(swan_env: None, tmp_path: Path) -> None:
    run = tracking_core.start_run(
        None, backends=["swanlab"], tracking_dir=tmp_path, options={"swanlab_mode": "offline"},
        delivery="thread", export=False,
    )
    actor = tracking_core.attach(run.handle, role="actor", writer=True, collect=False, delivery="thread")
    axis = {"step": 3, "step_key": "rollout/step"}
    actor.log_table("rollout/samples", SAMPLES, **axis)
    actor.log_histogram("rollout/rewards", VALUES, bins=4, **axis)
    actor.log_text("rollout/think", f"<think>step by step</think>\n{HF_TOKEN}", **axis)
    ckpt = tmp_path / "ckpt"
    (ckpt / "shard").mkdir(parents=True)
    (ckpt / "model.bin").write_bytes(b"\x00weights\x01")
    (ckpt / "shard" / "opt.txt").write_text("adam")
    actor.log_artifact(ckpt, name="ckpt-3", kind="checkpoint")
    assert actor.flush()
    for path in sorted(ckpt.rglob("*"), reverse=True):  # the caller moves on: the snapshot counts
        path.unlink() if path.is_file() else path.rmdir()
    summary = actor.finish()
    run.finish()
    assert not summary.backends["swanlab"]["failures"], summary

    (only,) = read_job(tmp_path / "swanlab", run.run_id)
    table = json.loads(media_json(only, "actor/rollout/samples", "echarts"))
    assert [c["field"] for c in table["colDefs"]] == ["prompt", "response", "reward", "ok", "note"]
    assert table["rowData"][0] == SAMPLES[0]
    assert table["rowData"][1]["response"].startswith("hi, my token is <redacted")
    hist = json.loads(media_json(only, "actor/rollout/rewards", "echarts"))
    import numpy as np

    counts, _ = np.histogram(VALUES, bins=4)
    assert [b for s in hist["series"] for b in s["data"]] == counts.tolist()  # one bar per bin
    assert only.scalars["actor/rollout/rewards/count"] == [(3, 10.0)]
    assert only.scalars["actor/rollout/rewards/mean"] == [(3, pytest.approx(sum(VALUES) / 10))]
    text = media_json(only, "actor/rollout/think", "text")
    assert text.startswith("<think>step by step</think>\n<redacted")
    assert {m["step"] for k in ("actor/rollout/samples", "actor/rollout/think") for m in only.media[k]} == {"3"}
    stored = only.path / "files" / "tracking-core" / "artifacts" / "actor" / "ckpt-3"
    assert (stored / "model.bin").read_bytes() == b"\x00weights\x01"
    assert (stored / "shard" / "opt.txt").read_text() == "adam"
    assert {
        "tracking-core/artifacts/actor/ckpt-3/model.bin", "tracking-core/artifacts/actor/ckpt-3/shard/opt.txt"
    } <= set(only.saves)
    assert grep_files(tmp_path, HF_TOKEN) == []
