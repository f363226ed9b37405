"""One job, one run: a driver plus an actor world (Megatron tp=2, dp=2) and a critic world
(pp=2), each started with torchrun; one writer per role; resume from the saved handle."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import tracking_core
from tests.helpers.subprocess_python import JOBS, run_python
from tests.helpers.tb_events import read_logdir
from tests.helpers.wandb_offline import W_VARS, find_offline_runs, offline_env, read_offline_runs

WORKER = JOBS / "role_worker.py"
ROOT = Path(__file__).resolve().parents[2]


def _torchrun(role: str, nproc: int, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         f"--nproc-per-node={nproc}", str(WORKER)],
        env={**env, "ROLE": role, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip


def _jsonl(run_dir: Path, role: str) -> list[dict]:
    return [json.loads(x) for x in (run_dir / f"{role}.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_driver_actor_and_critic_worlds_share_one_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACKING_CORE_RUN", raising=False)
    for name in W_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in offline_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("WANDB_DIR")  # W&B's runs under the tracking directory
    tdir = tmp_path / "td"
    run = tracking_core.start_run(
        config={"lr": 1e-6, "job": "ppo"},
        backends=["jsonl", "mlflow", "wandb", "tensorboard"],
        tracking_dir=tdir,
        export=False,
    )
    reports = tmp_path / "reports"
    reports.mkdir()
    env = {
        **os.environ,
        "TRACKING_CORE_RUN": run.handle.to_json(),
        "REPORT_DIR": str(reports),
        "STEPS": "6",
    }
    actor = _torchrun("actor", 4, {**env, "TP": "2", "MISMATCH_RANK": "3"})
    critic = _torchrun("critic", 2, {**env, "PP": "2"})
    outputs = {name: p.communicate(timeout=240)[0] for name, p in (("actor", actor), ("critic", critic))}
    assert actor.returncode == 0, outputs["actor"][-3000:]
    assert critic.returncode == 0, outputs["critic"][-3000:]
    run.finish()

    run_dir = tdir / "jsonl" / run.run_id
    assert sorted(p.name for p in run_dir.glob("*.jsonl")) == ["actor.jsonl", "critic.jsonl", "primary.jsonl"]
    writers = {}
    for role, world in (("actor", 4), ("critic", 2)):
        lines = _jsonl(run_dir, role)
        attaches = [x for x in lines if x["type"] == "attach"]
        assert len(attaches) == 1  # exactly one writer per role
        writers[role] = attaches[0]["label"].split("-")[1]
        metrics = [x for x in lines if x["type"] == "metric"]
        counts = Counter((m["name"], m["step"]) for m in metrics)
        assert counts == Counter(
            {(f"{role}/train/{k}", s): 1 for k in ("loss", "rank_seen") for s in range(6)}
        )
        assert {m["step_key"] for m in metrics} == {f"{role}/train/step"}
        rank_seen = {m["value"] for m in metrics if m["name"].endswith("rank_seen")}
        assert rank_seen == {float(writers[role][1:])}
        flags = [json.loads((reports / f"{role}-{r}.json").read_text()) for r in range(world)]
        assert [f["writer"] for f in flags] == [f"r{f['rank']}" == writers[role] for f in flags]
    # Megatron's main rank: the actor's is global rank 0 (tp=2, dp=2), the critic's is its last
    # pipeline stage, rank 1
    assert writers == {"actor": "r0", "critic": "r1"}

    host = socket.gethostname()
    configs = {x["namespace"]: x for r in ("actor", "critic") for x in _jsonl(run_dir, r) if x["type"] == "config"}
    assert configs["actor"]["params"]["actor/lr"] == 1e-6
    assert configs["critic"]["params"]["critic/lr"] == 1e-5
    assert configs["actor-ranks"]["params"]["actor/ranks/hosts"] == {host: "0-3"}
    assert configs["actor-ranks"]["params"]["actor/ranks/world_size"] == 4
    assert configs["critic-ranks"]["params"]["critic/ranks/hosts"] == {host: "0-1"}
    assert configs["critic-ranks"]["params"]["critic/ranks/config_mismatches"] == {}
    # the rank launched with another lr is reported by key and rank, on every rank
    mismatch = configs["actor-ranks"]["params"]["actor/ranks/config_mismatches"]
    assert mismatch == {"lr": {"0-2": 1e-6, "3": 3e-6}}
    assert "lr: ranks 0-2 = 1e-06, ranks 3 = 3e-06" in outputs["actor"]
    assert json.loads((reports / "actor-1.json").read_text())["mismatches"] == mismatch

    # one run per backend, every metric of every role exactly once per step
    from mlflow.tracking import MlflowClient

    entries = run.handle.backends
    client = MlflowClient(entries["mlflow"]["tracking_uri"])
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.run_id for r in runs] == [entries["mlflow"]["run_id"]]
    params = runs[0].data.params
    assert params["actor/lr"] == "1e-06" and params["critic/lr"] == "1e-05"
    assert params["actor/ranks/hosts"] == f'{{"{host}": "0-3"}}'
    wandb_dirs = find_offline_runs(tdir)
    # driver, actor writer, critic writer: one run id (on failure, show what the ranks said)
    assert len(wandb_dirs) == 3, outputs["actor"][-4000:] + outputs["critic"][-4000:]
    wandb_runs = read_offline_runs(wandb_dirs)
    assert {r.run_id for r in wandb_runs} == {entries["wandb"]["id"]}
    wandb_rows = [row for r in wandb_runs for row in r.history]
    tb = read_logdir(entries["tensorboard"]["logdir"])
    for role in ("actor", "critic"):
        for key in ("loss", "rank_seen"):
            name = f"{role}/train/{key}"
            history = client.get_metric_history(entries["mlflow"]["run_id"], name)
            assert sorted(m.step for m in history) == list(range(6)), name
            assert sorted(row[f"{role}/train/step"] for row in wandb_rows if name in row) == list(range(6))
            assert [s for s, _ in tb[role].scalars[f"train/{key}"]] == list(range(6))

    # restart the driver from the saved handle: the same run continues, steps continue
    resumed = tracking_core.start_run(handle=run.handle.run_dir, export=False)
    assert resumed.run_id == run.run_id
    for step in range(6, 9):
        resumed.log_metrics({"driver/step_time": 0.1 * step}, step=step)
    resumed.finish()
    primary = _jsonl(run_dir, "primary")
    assert [x["step"] for x in primary if x["type"] == "metric"] == [6, 7, 8]
    assert [x["type"] for x in primary].count("attach") == 1  # resumed, not reopened
    assert [x["status"] for x in primary if x["type"] == "status"] == ["FINISHED", "FINISHED"]
    history = client.get_metric_history(entries["mlflow"]["run_id"], "driver/step_time")
    assert sorted(m.step for m in history) == [6, 7, 8]
    assert [s for s, _ in read_logdir(entries["tensorboard"]["logdir"])["launch"].scalars["driver/step_time"]] == [6, 7, 8]


def test_megatron_is_not_imported_by_tracking_core(tmp_path: Path) -> None:
    out = run_python(JOBS / "one_run_no_megatron.py", args=[tmp_path])
    assert out.stdout.strip() == "[]"
