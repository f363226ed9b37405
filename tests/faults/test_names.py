"""Names are data, never paths: whatever a role, run id, run name, namespace, metric, table,
text or artifact name holds (``..``, ``/``, ``\\``, an absolute path, NUL and control characters,
nothing, 300 characters), nothing is written outside the tracking directory (or the tracker's own
configured directory), and every record is delivered, under a mapped file name where the name
cannot be one and under the name as given where the tracker takes it as data.

Each job runs in a fresh interpreter whose working directory is a fresh folder deep inside the
test's own, with the tracking directory inside it: what a name could reach by climbing or by
being absolute (a folder inside the test's own) is listed before and after the job.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import DROP
from tests.helpers.subprocess_python import JOBS, python_env
from tracking_core.records import TableRecord, TextRecord

ROLE = "../../../x"
#: A second writer (TensorBoard keeps one kind per tag and run: texts go to their own).
TEXT_ROLE = ".."
RUN_ID = "../../../../rid"
RUN_NAME = "../../../../run name"
NAMESPACE = "../../ns"


def hostile_names(root: Path) -> list[str]:
    """The worst names: climbing, absolute (into the test's folder), empty, dots, NUL, control
    characters, a backslash, 300 characters, and one plain name for reference."""
    return [
        "../../x",
        f"{root}/abs/x",
        "a/../../b",
        "..",
        ".",
        "",
        "nul\0byte",
        "ctl\x01\x7f",
        "back\\slash",
        "y" * 300,
        "plain/name",
    ]


def tree(root: Path, skip: Path) -> set[str]:
    """Every path under ``root`` (relative), ``skip`` and what is under it left out."""
    out: set[str] = set()
    for dirpath, dirs, files in os.walk(root):
        here = Path(dirpath)
        if here == skip:
            dirs[:] = []
            continue
        for name in dirs + files:
            path = here / name
            if path != skip:
                out.add(str(path.relative_to(root)))
    return out


def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A working directory deep inside ``tmp_path`` and the tracking directory in it."""
    work = tmp_path / "d1" / "d2" / "d3" / "d4" / "work"
    work.mkdir(parents=True)
    (work / "art.txt").write_text("artifact bytes")
    return work, work / "tr"


# -- jsonl, W&B offline and TensorBoard -----------------------------------------------------------
LOCAL_JOB = JOBS / "names_local.py"
ODD = {"role": ROLE, "text_role": TEXT_ROLE, "run_id": RUN_ID, "run_name": RUN_NAME, "namespace": NAMESPACE}


def _clean_summary(summary: dict[str, Any]) -> None:
    assert summary["status"] == "FINISHED", summary["describe"]
    assert summary["drained"] is True, summary["describe"]
    for name, backend in summary["backends"].items():
        assert not backend.get("failures"), f"{name}: {summary['describe']}"
        assert not backend.get("rejected"), f"{name}: {summary['describe']}"


@pytest.mark.slow
def test_hostile_names_stay_in_the_tracking_directory_and_arrive(tmp_path: Path, jobs) -> None:
    pytest.importorskip("wandb")
    pytest.importorskip("tensorboardX")
    from tests.helpers.tb_events import read_logdir
    from tests.helpers.wandb_offline import offline_env, read_job

    work, td = layout(tmp_path)
    names = hostile_names(tmp_path)
    wandb_env = offline_env(tmp_path / "wandb-own")  # W&B's cache and config dirs: its own
    wandb_env.pop("WANDB_DIR")  # its runs: in the tracking directory
    env = python_env({**wandb_env, "PYTHONUNBUFFERED": "1"}, drop=DROP)
    before_tmp = tree(tmp_path, td)
    before_root = set(os.listdir("/"))

    job = jobs(LOCAL_JOB, env, args=[td, json.dumps(names), json.dumps(ODD)], cwd=work).wait(300)

    # Nothing outside the tracking directory but W&B's own folders and the job's stderr file.
    made = tree(tmp_path, td) - before_tmp
    outside = {p for p in made if not p.startswith("wandb-own") and not p.startswith("job")}
    assert outside == set(), f"written outside {td}: {sorted(outside)}"
    assert set(os.listdir("/")) == before_root
    res = job.result
    for summary in res["summaries"]:
        _clean_summary(summary)

    # Files named by the mapping, inside the tracking directory.
    from tracking_jsonl.backend import run_dir as jsonl_run_dir
    from tracking_wandb.media import media_key

    from tracking_core.names import path_part, path_under

    role_part, text_part = path_part(ROLE), path_part(TEXT_ROLE)
    assert [label.split("-r")[0] for label in res["labels"]] == [role_part, text_part]
    saved = td / "runs" / path_part(RUN_ID)
    assert (saved / "handle.json").is_file()
    assert {p.name for p in (saved / "config").iterdir()} == {
        f"{path_part(n)}.json" for n in ("launch", ROLE, NAMESPACE)
    }
    assert Path(res["logdir"]) == td.absolute() / "tensorboard" / path_part(RUN_NAME)

    # jsonl: every record under its name as given; the artifacts' copies under mapped names.
    jdir = jsonl_run_dir(td, RUN_ID)

    def records(part: str, kind: str) -> set[str]:
        lines = [json.loads(x) for x in (jdir / f"{part}.jsonl").read_text().splitlines()]
        return {r["key"] for r in lines if r["type"] == kind}

    artifacts = {n or "art.txt" for n in names}  # an empty name: the file's own
    assert records(role_part, "metric") == set(names)
    assert records(role_part, "artifact") == artifacts
    assert records("primary", "table") == set(names)
    assert records(text_part, "text") == set(names)
    for name in artifacts:
        copy = jdir / "artifacts" / role_part / path_under(name) / "art.txt"
        assert copy.read_text() == "artifact bytes", name
    assert (jdir / "artifacts" / "primary" / path_under("../../primary-x") / "art.txt").is_file()

    # TensorBoard: each role's run is the role as a file name; tags are the keys as given.
    runs = read_logdir(res["logdir"])
    assert set(runs) == {"launch", role_part, text_part}, sorted(runs)
    assert set(runs[role_part].scalars) == set(names)
    assert set(runs[text_part].text) >= set(names)
    assert set(runs["launch"].text) >= set(names)  # the tables

    # W&B: each writer's offline run folder is in the tracking directory; metric keys as given,
    # table and text keys as W&B can store them (file names), every table and text read back.
    offline = {r.suffix.split("-r")[0] or "primary": r for r in read_job(res["wandb_dir"], RUN_ID.replace("/", "-"))}
    assert set(offline) == {"primary", role_part, text_part}, offline
    assert all(td.absolute() in r.path.parents for r in offline.values())
    wid = offline["primary"].run_id

    def keys(part: str) -> set[str]:
        """History keys, a media value's (flattened: ``<key>._type``, ...) as its key."""
        return {k.rsplit("._type", 1)[0] for row in offline[part].history for k in row if "._" not in k or k.endswith("._type")}

    assert {f"{ROLE}/{n}" for n in names} <= keys(role_part)
    assert {media_key(_record(TableRecord, n, None), wid) for n in names} <= keys("primary")
    assert {media_key(_record(TextRecord, n, TEXT_ROLE), wid) for n in names} <= keys(text_part)
    tables = sorted((offline["primary"].path / "files" / "media" / "table").rglob("*.table.json"))
    assert sorted(json.loads(f.read_text())["data"][0][1] for f in tables) == sorted(names)
    html = sorted((offline[text_part].path / "files" / "media" / "html").rglob("*.html"))
    assert len(html) == len(names)


def _record(cls: type, name: str, role: str | None) -> Any:
    """A table or text record of ``name`` logged by ``role`` (what ``media_key`` reads)."""
    prefix = "" if role is None else f"{role}/"
    if cls is TableRecord:
        return TableRecord(name, ("n",), ((0,),), 0, 0.0, 0, role, prefix)
    return TextRecord(name, "", 0, 0.0, 0, role, prefix)


# -- MLflow against a real server -----------------------------------------------------------------
#: Keys MLflow refuses as they are whose renames used to land on each other or on a key as given.
CLASHING = ["acc/top-1!", "acc/top-1?", "acc/top-1_", "a//b", "a/b", "x--deadbeef", "x"]

MLFLOW_JOB = JOBS / "names_mlflow.py"


@pytest.mark.slow
def test_mlflow_renames_never_collide_and_dotted_names_arrive(tmp_path: Path, jobs, mlflow_server) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from tests.faults.mlflow_runs import the_run

    work, td = layout(tmp_path)
    names = [n for n in hostile_names(tmp_path) if n]  # an empty artifact name is the file's own
    env = python_env({"PYTHONUNBUFFERED": "1"}, drop=DROP)
    before = tree(tmp_path, td)
    job = jobs(MLFLOW_JOB, env, args=[mlflow_server.uri, json.dumps(names), json.dumps(CLASHING)], cwd=work).wait(300)
    made = {p for p in tree(tmp_path, td) - before if not p.startswith("job")}
    assert made == set(), f"written outside {td}: {sorted(made)}"
    res = job.result
    assert res["child"] == "true", res["child_err"]
    _clean_summary(res["summary"])

    from tracking_mlflow.keys import mlflow_key
    from tracking_mlflow.media import artifact_dir

    client = MlflowClient(mlflow_server.uri)
    run_id = the_run(mlflow_server.uri, res["run_id"]).info.run_id
    # Each key its own series, with exactly its own values from both writers.
    for i, key in enumerate(CLASHING):
        points = sorted((m.step, m.value) for m in client.get_metric_history(run_id, mlflow_key(key)))
        assert points == [(s, i * 100 + s) for s in range(10)], (key, mlflow_key(key), points)
    tags = client.get_run(run_id).data.tags
    renamed = {k for k in CLASHING if mlflow_key(k) != k}
    assert renamed == {"acc/top-1!", "acc/top-1?", "a//b", "x--deadbeef"}
    for key in renamed:
        assert tags[f"tracking_core.metric_key/{mlflow_key(key)}"] == key
    warned = [w for w in job.warnings if "MLflow: metric key" in w]
    assert len(warned) == len(renamed) and all(any(repr(mlflow_key(k)) in w for w in warned) for k in renamed)

    # Every artifact, table and text of a dotted, absolute or odd name is stored, under its folder.
    stored: set[str] = set()
    folders = [""]
    while folders:
        for info in client.list_artifacts(run_id, folders.pop() or None):
            (folders.append(info.path) if info.is_dir else stored.add(info.path))
    for name in names:
        assert f"artifacts/{artifact_dir(name)}/art.txt" in stored, (name, sorted(stored))
        assert f"tables/{artifact_dir(name)}/step-000000.json" in stored, name
        assert f"texts/{artifact_dir(name)}/step-000000.txt" in stored, name


# -- SwanLab (offline) and trackio ----------------------------------------------------------------
SWAN_JOB = JOBS / "names_swan.py"


@pytest.mark.slow
def test_hostile_names_stay_in_swanlab_and_trackio_directories(tmp_path: Path, jobs) -> None:
    pytest.importorskip("swanlab")
    pytest.importorskip("trackio")
    from tests.backends.test_swanlab import S_VARS, read_run_dir
    from tests.backends.test_trackio import read_store

    work, td = layout(tmp_path)
    names = hostile_names(tmp_path)
    own = {"SWANLAB_ROOT": str(tmp_path / "swanlab-own"), "PYTHONUNBUFFERED": "1"}
    env = python_env(own, drop=(*DROP, *S_VARS, "TRACKIO_*"))
    before = tree(tmp_path, td)
    job = jobs(SWAN_JOB, env, args=[td, json.dumps(names), json.dumps(ODD)], cwd=work).wait(300)
    made = {p for p in tree(tmp_path, td) - before if not p.startswith(("job", "swanlab-own"))}
    assert made == set(), f"written outside {td}: {sorted(made)}"
    res = job.result
    for summary in res["summaries"]:
        _clean_summary(summary)

    from tracking_core.names import path_part, path_under

    # SwanLab: the role's run folder (named with its label) in the log dir; artifacts under
    # their names as file names; every value there (SwanLab shapes keys by its own rules).
    log_dir = Path(res["swanlab"]["log_dir"])
    assert td.absolute() in log_dir.parents
    (folder,) = [p for p in log_dir.iterdir() if f"-{path_part(ROLE)}-r" in p.name]
    swan = read_run_dir(folder)
    values = [s for key, points in swan.scalars.items() if not key.endswith("/step") for s, _ in points]
    # SwanLab itself drops a scalar whose key holds a control character (not a path matter).
    plain = [i for i, n in enumerate(names) if n.isprintable()]
    assert sorted(values) == plain, {k: len(v) for k, v in swan.scalars.items()}
    for name in {n or "art.txt" for n in names}:
        copy = folder / "files" / "tracking-core" / "artifacts" / path_under(f"{ROLE}/{name}") / "art.txt"
        assert copy.read_text() == "artifact bytes", name

    # trackio: its store in the tracking directory holds every metric under its name as given.
    store = read_store(Path(res["trackio"]["dir"]), res["trackio"]["project"])
    logged = {k for rows in store["logs"].values() for row in rows for k in row}
    assert {f"{ROLE}/{n}" for n in names} <= logged, sorted(logged)
