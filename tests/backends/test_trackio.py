"""The trackio backend against trackio's real local store, read back with trackio's own storage
API (``trackio.sqlite_storage.SQLiteStorage``: ``get_projects``, ``get_runs``, ``get_logs``,
``get_run_config``, ``get_alerts``).

trackio fixes its data directory (``TRACKIO_DIR``) when it is imported, so everything that touches
trackio runs in its own interpreter: the job's processes, and the reader (:func:`read_store`).
The multi-process test runs one job as slime does: a driver (primary) and two role writers (actor,
critic) in their own processes. Planted secrets (an ``hf_`` token in a config value, ``HF_TOKEN``
in the environment) must appear in no file trackio wrote.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.subprocess_python import JOBS, run_python
from tracking_core import RunContext

if importlib.util.find_spec("trackio") is None:  # not imported here: it would fix its directory
    pytest.skip("trackio is not installed", allow_module_level=True)

T_VARS = (
    "TRACKIO_DIR",
    "TRACKIO_PROJECT",
    "TRACKIO_RUN_NAME",
    "TRACKIO_GROUP",
    "TRACKIO_SPACE_ID",
    "TRACKIO_SERVER_URL",
    "TRACKING_CORE_RUN",
    "TRACKING_CORE_BACKENDS",
)
HF_TOKEN = "hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa0987654321"
STEPS = 5
LAUNCH = {"lr": 3e-6, "seed": 7, "use_kl_loss": True, "save": None, "hub_note": HF_TOKEN}
ACTOR = {"lr": 1e-6, "micro_batch_size": 2}
CRITIC = {"lr": 1e-5, "micro_batch_size": 4, "num_critic_only_steps": 1}

READER = JOBS / "trackio_reader.py"


def read_store(directory: Path, project: str) -> dict[str, Any]:
    """What trackio's own storage API says about ``project`` in ``directory``."""
    out = run_python(READER, args=[project], env={"TRACKIO_DIR": str(directory)}, drop=T_VARS)
    return json.loads(out.stdout.strip().splitlines()[-1])


def grep_files(root: Path, needle: str) -> list[Path]:
    data = needle.encode()
    return [p for p in root.rglob("*") if p.is_file() and data in p.read_bytes()]


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in T_VARS}
    env.update(extra)
    return env


def test_target_from_options_and_trackio_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracking_trackio.options import project_file, show_command, target

    for name in T_VARS:
        monkeypatch.delenv(name, raising=False)
    ctx = RunContext(backend="trackio", run_id="job-1", name="ppo", primary=True, tracking_dir=tmp_path / "td")
    assert target(ctx) == {
        "project": "tracking-core", "run": "ppo", "run_id": "job-1", "group": None,
        "dir": str((tmp_path / "td" / "trackio").absolute()),
    }
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "tk"))
    monkeypatch.setenv("TRACKIO_PROJECT", "env-proj")
    monkeypatch.setenv("TRACKIO_GROUP", "g")
    where = target(ctx)
    assert (where["dir"], where["project"], where["group"]) == (str(tmp_path / "tk"), "env-proj", "g")
    ctx.options = {"trackio_project": "opt-proj", "trackio_run_name": "run-a"}
    assert (target(ctx)["project"], target(ctx)["run"]) == ("opt-proj", "run-a")
    from tracking_core.views import runnable

    assert show_command(where) == f"TRACKIO_DIR={tmp_path / 'tk'} {runnable('trackio')} show --project env-proj"
    assert project_file("my.model") == "mymodel.db"


def test_a_role_attaches_only_once_the_primary_opened(tmp_path: Path) -> None:
    out = run_python(
        JOBS / "trackio_attach_order.py",
        args=[tmp_path],
        drop=T_VARS,
    )
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["first"].startswith("not open: trackio run job-9 is not open yet")


DRIVER = JOBS / "trackio_driver.py"

CHILD = JOBS / "tracker_role_writer.py"


def run_job(tmp_path: Path, status: str = "FINISHED") -> dict[str, Any]:
    env = base_env(
        TEST_CONFIGS=json.dumps({"launch": LAUNCH, "actor": ACTOR, "critic": CRITIC}),
        TEST_TDIR=str(tmp_path / "tracking"),
        TEST_CHILD=str(CHILD),
        TEST_STEPS=str(STEPS),
        TEST_STATUS=status,
        HF_TOKEN=HF_TOKEN,
    )
    proc = subprocess.run(
        [sys.executable, str(DRIVER)], capture_output=True, text=True, env=env, timeout=240, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["codes"] == [0, 0] and result["failures"] == {}
    return result


@pytest.mark.slow
@pytest.mark.integration
def test_driver_and_two_role_writers_one_run(tmp_path: Path) -> None:
    result = run_job(tmp_path, "FINISHED")
    rid = result["run_id"]
    store = tmp_path / "tracking" / "trackio"
    assert result["entry"] == {
        "project": "tc-test", "run": rid, "run_id": rid, "group": "ppo", "dir": str(store),
    }
    doc = read_store(store, "tc-test")
    assert doc["projects"] == ["tc-test"]
    assert doc["runs"] == [rid]  # one run for the job, whatever the number of writers

    config = doc["configs"][rid]
    assert {k: config[k] for k in ("lr", "seed", "use_kl_loss")} == {
        "lr": 3e-6, "seed": 7, "use_kl_loss": True,
    }
    assert "save" not in config  # a null value is no param (the config text keeps it)
    assert config["hub_note"].startswith("<redacted")
    assert (config["actor/lr"], config["actor/micro_batch_size"]) == (1e-6, 2)
    assert (config["critic/lr"], config["critic/num_critic_only_steps"]) == (1e-5, 1)
    assert config["_Group"] == "ppo"
    assert config["tracking_core/status"] == "FINISHED"
    actor_doc = json.loads(config["tracking_core/config/actor"])
    assert actor_doc["values"] == ACTOR and actor_doc["prefix"] == "actor/"
    assert doc["alerts"][rid] == []

    rows = doc["logs"][rid]
    for role, scale in (("actor", 1.0), ("critic", 0.5)):
        mine = [r for r in rows if f"{role}/train/loss" in r]
        assert [r["step"] for r in mine] == list(range(STEPS))
        assert all(r[f"{role}/train/step"] == r["step"] for r in mine)
        assert all(math.isclose(r[f"{role}/train/loss"], scale / (r["step"] + 1)) for r in mine)
        assert all(math.isclose(r[f"{role}/train/kl"], 0.01 * r["step"]) for r in mine)
    perf = [r for r in rows if "perf/step_time" in r]
    assert [(r["step"], r["perf/step_time"]) for r in perf] == [(s, 2.0 + s) for s in range(STEPS)]
    assert all(math.isnan(r["perf/nan"]) for r in perf)
    assert len(rows) == 3 * STEPS  # each row once

    assert grep_files(tmp_path / "tracking", HF_TOKEN) == []


RICH = JOBS / "trackio_rich.py"


@pytest.mark.slow
@pytest.mark.integration
def test_tables_histograms_texts_and_a_failed_status(tmp_path: Path) -> None:
    import numpy as np

    samples = [
        {"prompt": "What is 2*3?", "response": "6", "reward": 1.0, "ok": True, "note": None},
        {"prompt": "Say hi", "response": f"hi {HF_TOKEN}", "reward": -0.5, "ok": False, "note": "x"},
    ]
    values = [0.1, 0.4, 0.4, 0.9, 1.5, 2.0, 2.0, 2.0, 3.7, 4.0]
    out = run_python(
        RICH, args=[tmp_path / "td"], drop=T_VARS,
        env={"SAMPLES": json.dumps(samples), "VALUES": json.dumps(values), "HF_SECRET": HF_TOKEN},
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["failures"] == [{}, {}]
    rid = result["run_id"]
    doc = read_store(tmp_path / "td" / "trackio", "rich")
    rows = {next(k for k in r if k.startswith("actor/rollout/") and "/rollout/step" not in k and "/rewards/" not in k): r
            for r in doc["logs"][rid]}
    table = rows["actor/rollout/samples"]["actor/rollout/samples"]
    assert table["_type"] == "trackio.table"
    assert table["_value"][0] == samples[0]
    assert table["_value"][1]["response"].startswith("hi <redacted")
    hist_row = rows["actor/rollout/rewards"]
    hist = hist_row["actor/rollout/rewards"]
    counts, edges = np.histogram(values, bins=4)
    assert hist["_type"] == "trackio.histogram" and hist["values"] == counts.tolist()
    assert np.allclose(hist["bins"], edges)
    assert hist_row["actor/rollout/rewards/count"] == 10 and math.isclose(hist_row["actor/rollout/rewards/mean"], 1.7)
    text = rows["actor/rollout/think"]["actor/rollout/think"]
    assert text["_type"] == "trackio.markdown" and text["_value"].startswith("<think>step by step</think> <redacted")
    assert {r["step"] for r in rows.values()} == {3} and all(r["actor/rollout/step"] == 3 for r in rows.values())
    assert grep_files(tmp_path / "td", HF_TOKEN) == []
    # trackio has no run state: the status is in the run's config, and a failure is an alert.
    assert doc["configs"][rid]["tracking_core/status"] == "FAILED"
    assert doc["alerts"][rid] == [{"title": "run failed", "level": "error"}]
