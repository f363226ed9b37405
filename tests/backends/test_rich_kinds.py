"""Tables, histograms, texts and artifacts in W&B, MLflow and TensorBoard, read back with each
tracker's own reader: W&B offline run files (``wandb leet inspect`` and the files it names),
``MlflowClient`` against a real ``mlflow server``, TensorBoard's event accumulator and its text
plugin's renderer.

The records are built by hand here and handed to each backend's hooks, as its delivery worker
would; a retried record (the same record offered again) must be stored once, and the artifact
snapshot is removed as soon as the hook returns, as the core does once every backend has it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import json
import logging
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.mlflow_server import MlflowServer, mlflow_server  # noqa: F401
from tests.helpers.wandb_offline import W_VARS, offline_env, read_job
from tracking_core import RunContext, RunStatus
from tracking_core.records import (
    ArtifactRecord,
    Cell,
    HistogramRecord,
    TableRecord,
    TextRecord,
)

ROLE, PREFIX, AXIS = "actor", "actor/", "rollout/step"
COLUMNS = ("prompt", "response", "reward", "truncated", "label")
ROWS: tuple[tuple[Cell, ...], ...] = (
    ("What is 2*3?", "<think>2*3 = 6</think>\nThe answer is **6** | done", 1.0, False, None),
    ("Say hi", "hi\n\n  indented `code` & <b>bold</b>", -0.5, True, "greeting"),
    ("Count", "1. one\n# two\n- three [x](y)", 0.25, False, "list"),
)
TEXT = "<think>step by step</think>\n```python\nprint('hi')\n```\n\ttabbed & *starred* | piped\n"
VALUES = [0.1, 0.4, 0.4, 0.9, 1.5, 2.0, 2.0, 2.0, 3.7, 4.0]

_seq = iter(range(1, 10**6))


# -- records, built as the core builds them -------------------------------------------------------
def table_record(
    key: str, rows: Sequence[Sequence[Cell]], step: int | None, columns: Sequence[str] = COLUMNS
) -> TableRecord:
    return TableRecord(
        key=key,
        columns=tuple(columns),
        rows=tuple(tuple(r) for r in rows),
        step=step,
        timestamp=time.time(),
        seq=next(_seq),
        role=ROLE,
        prefix=PREFIX,
        step_key=AXIS,
    )


def histogram_record(
    key: str, values: Sequence[float], step: int, bins: int = 8
) -> HistogramRecord:
    arr = np.asarray(values, dtype=float)
    counts, edges = np.histogram(arr, bins=bins)
    return HistogramRecord(
        key=key,
        counts=tuple(int(c) for c in counts),
        edges=tuple(float(e) for e in edges),
        count=int(arr.size),
        min=float(arr.min()),
        max=float(arr.max()),
        sum=float(arr.sum()),
        sum_squares=float((arr**2).sum()),
        percentiles={f"p{q}": float(np.percentile(arr, q)) for q in (5, 50, 95)},
        step=step,
        timestamp=time.time(),
        seq=next(_seq),
        role=ROLE,
        prefix=PREFIX,
        step_key=AXIS,
    )


def text_record(key: str, text: str, step: int | None) -> TextRecord:
    return TextRecord(
        key=key,
        text=text,
        step=step,
        timestamp=time.time(),
        seq=next(_seq),
        role=ROLE,
        prefix=PREFIX,
        step_key=AXIS,
    )


def artifact_record(source: Path, snapshots: Path, key: str, kind: str) -> ArtifactRecord:
    """A snapshot of ``source`` (named unlike it, as the core's are) and its record."""
    snapshots.mkdir(parents=True, exist_ok=True)
    snap = snapshots / f"snap-{next(_seq)}"
    if source.is_dir():
        shutil.copytree(source, snap)
        files = tuple(
            sorted(
                (p.relative_to(snap).as_posix(), p.stat().st_size)
                for p in snap.rglob("*")
                if p.is_file()
            )
        )
    else:
        shutil.copyfile(source, snap)
        files = ((source.name, snap.stat().st_size),)
    return ArtifactRecord(
        key=key,
        kind=kind,
        path=str(snap),
        source=str(source),
        is_dir=source.is_dir(),
        size=sum(size for _, size in files),
        files=files,
        timestamp=time.time(),
        seq=next(_seq),
        role=ROLE,
        prefix=PREFIX,
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_sources(root: Path) -> tuple[Path, Path]:
    """A checkpoint file and a directory of samples, with known bytes."""
    root.mkdir(parents=True, exist_ok=True)
    ckpt = root / "model.pt"
    ckpt.write_bytes(os.urandom(300_000))
    samples = root / "samples"
    (samples / "part").mkdir(parents=True)
    (samples / "a.jsonl").write_text('{"a": 1}\n')
    (samples / "part" / "b.bin").write_bytes(os.urandom(1000))
    return ckpt, samples


def tree_hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): sha256(p) for p in root.rglob("*") if p.is_file()}


def context(backend: str, tmp: Path, run_id: str, **kw: Any) -> RunContext:
    return RunContext(backend=backend, run_id=run_id, name="rich", tracking_dir=tmp / "td", **kw)


# -- pure shaping ---------------------------------------------------------------------------------
def test_names_and_bins_shaped_for_each_tracker() -> None:
    from tracking_mlflow.media import artifact_dir, step_stem
    from tracking_wandb.media import artifact_name, artifact_type, merge_bins

    assert artifact_name("actor/ckpt") == "actor-ckpt"
    assert artifact_name("eval/aime:v1 best@3") == "eval-aime_v1_best_3"
    long = artifact_name("x" * 300)
    assert len(long) == 128 and long == artifact_name("x" * 300) != artifact_name("x" * 301)
    assert artifact_type("checkpoint") == "checkpoint"
    assert artifact_type("job") == artifact_type("wandb-history") == "artifact"
    assert artifact_type("a/b:c") == "a-b-c"
    counts, edges = merge_bins(list(range(10)), [float(i) for i in range(11)], 4)
    assert counts == [0 + 1 + 2, 3 + 4 + 5, 6 + 7 + 8, 9] and edges == [0.0, 3.0, 6.0, 9.0, 10.0]
    assert artifact_dir("eval/aime/samples") == "eval/aime/samples"
    # A name that must change carries its hash: two names never share a folder.
    assert artifact_dir("eval/aime:v1/samples").startswith("eval/aime_v1/samples--")
    assert artifact_dir("eval/aime_v1/samples") == "eval/aime_v1/samples"
    assert artifact_dir("passrate/pass@1").startswith("passrate/pass_at_1--")
    assert artifact_dir("a//b/../c").startswith("a/b/__/c--")
    assert artifact_dir("..") != artifact_dir("__") == "__"
    assert step_stem(12) == "step-000012" and step_stem(None) == "step-000000"


def test_tensorboard_shows_cells_and_texts_as_written() -> None:
    """What TensorBoard's text plugin renders (its own markdown and sanitiser) for a table and
    a text holds every cell and the text verbatim."""
    from tensorboard.plugins.text.text_plugin import text_array_to_html
    from tracking_tensorboardx.media import table_markdown, text_markdown, text_of_markdown

    markdown, left_out = table_markdown(table_record("samples", ROWS, 1))
    assert left_out == 0
    shown = text_array_to_html(np.array(markdown.encode()), enable_markdown=True)
    assert shown.count("<tr>") == len(ROWS) + 1  # the header and every row
    for row in ROWS:
        for cell in row:
            if cell is None:
                continue
            for line in str(cell).split("\n"):
                assert html.escape(line.strip(), quote=False) in shown, line
    assert "<think>" not in shown  # shown as text, never passed on as a tag

    rendered, cut = text_markdown(TEXT)
    assert cut == 0 and text_of_markdown(rendered) == TEXT
    shown = text_array_to_html(np.array(rendered.encode()), enable_markdown=True)
    assert "<pre><code>" in shown
    for line in TEXT.splitlines():
        assert html.escape(line.expandtabs(4), quote=False) in shown, line  # markdown expands tabs

    many = table_record("big", [("x" * 100,) * 5] * 50, 1)
    markdown, left_out = table_markdown(many, limit=2000)
    assert 0 < left_out < 50 and len(markdown) < 2200
    assert f"{left_out} of 50 rows left out" in markdown
    cut_text, cut = text_markdown("y" * 5000, limit=1000)
    assert cut == 4000 and "4000 of 5000 characters left out" in cut_text


# -- W&B --------------------------------------------------------------------------------------------
@pytest.fixture
def wandb_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in W_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in offline_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    return tmp_path


def _wandb_item(row: dict[str, Any], name: str) -> dict[str, Any]:
    """A media value of a history row, as W&B's reader flattens it (``name._type`` ...)."""
    return {k[len(name) + 1 :]: v for k, v in row.items() if k.startswith(name + ".")}


@pytest.mark.integration
def test_wandb_reads_back_every_kind(
    wandb_env: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("wandb")
    import wandb
    from tracking_wandb.backend import WandbBackend
    from tracking_wandb.media import text_of_html

    monkeypatch.setattr(wandb.Table, "MAX_ROWS", 3)
    monkeypatch.setattr(wandb.Table, "MAX_ARTIFACT_ROWS", 5)
    monkeypatch.setattr(wandb.Histogram, "MAX_LENGTH", 4)
    ctx = context(
        "wandb", wandb_env, "rich-wandb-1", primary=True, options={"wandb_mode": "offline"}
    )
    backend = WandbBackend(ctx)
    backend.open_run(run=ctx, target=None)
    ckpt, samples = make_sources(wandb_env / "src")
    want_ckpt, want_samples = sha256(ckpt), tree_hashes(samples)

    samples_table = table_record("rollout/samples", ROWS, 3)
    mixed = table_record("mixed", [(1,), ("two",), (None,)], 3, columns=("value",))
    big = table_record("big", [(i, f"row {i}") for i in range(7)], 4, columns=("i", "s"))
    hist = histogram_record("rollout/rewards", VALUES, 3, bins=10)
    with caplog.at_level(logging.WARNING, logger="tracking_core"):
        for record in (samples_table, mixed, big):
            backend.log_table(record)
        backend.log_histogram(hist)
    backend.log_text(text_record("rollout/sample_text", TEXT, 3))
    for record in (
        artifact_record(ckpt, wandb_env / "snap", "checkpoint", "model"),
        artifact_record(samples, wandb_env / "snap", "rollout/dump", "job"),  # a reserved type
    ):
        backend.log_artifact(record)
        shutil.rmtree(record.path) if record.is_dir else os.remove(record.path)
    ckpt.unlink()
    shutil.rmtree(samples)
    backend.close_run(RunStatus.FINISHED, ctx)

    (run,) = read_job(wandb_env / "wandb-root", ctx.run_id)
    files = run.path / "files"
    rows = {name: row for row in run.history for name in row if name.endswith("._type")}

    # tables: every row and cell, on the step axis
    row = rows["actor/rollout/samples._type"]
    assert row["actor/rollout/step"] == 3
    item = _wandb_item(row, "actor/rollout/samples")
    assert item["_type"] == "table-file" and item["nrows"] == len(ROWS)
    doc = json.loads((files / item["path"]).read_text())
    assert doc["columns"] == list(COLUMNS)
    assert [tuple(r) for r in doc["data"]] == list(ROWS)
    assert run.metric_definitions["actor/rollout/samples"]["step_metric"] == "actor/rollout/step"
    mixed_doc = json.loads(
        (files / _wandb_item(rows["actor/mixed._type"], "actor/mixed")["path"]).read_text()
    )
    assert [r[0] for r in mixed_doc["data"]] == [1, "two", None]
    # W&B's row limits: its media file keeps MAX_ROWS, its run_table artifact MAX_ARTIFACT_ROWS
    big_item = _wandb_item(rows["actor/big._type"], "actor/big")
    assert len(json.loads((files / big_item["path"]).read_text())["data"]) == 3
    artifacts = [r["artifact"] for r in run.records if r.get("type") == "artifact"]
    (big_art,) = [a for a in artifacts if a["type"] == "run_table" and "big" in a["name"]]
    staged = json.loads(Path(big_art["manifest"]["contents"][0]["local_path"]).read_text())
    assert [r[0] for r in staged["data"]] == [0, 1, 2, 3, 4]
    warned = [r.getMessage() for r in caplog.records if "'actor/big'" in r.getMessage()]
    assert len(warned) == 1 and "7 rows" in warned[0] and "last 2 rows are not in W&B" in warned[0]

    # histogram: 10 bins merged to W&B's 4 (patched) with every value counted
    item = _wandb_item(rows["actor/rollout/rewards._type"], "actor/rollout/rewards")
    assert item["_type"] == "histogram"
    assert sum(item["values"]) == len(VALUES) and len(item["values"]) == 4
    assert item["bins"][0] == pytest.approx(min(VALUES)) and item["bins"][-1] == pytest.approx(4.0)
    assert any("'actor/rollout/rewards' has 10 bins" in r.getMessage() for r in caplog.records)

    # text: verbatim
    item = _wandb_item(rows["actor/rollout/sample_text._type"], "actor/rollout/sample_text")
    assert item["_type"] == "html-file"
    assert text_of_html((files / item["path"]).read_text()) == TEXT

    # artifacts: the bytes as logged, though snapshot and source are gone
    by_name = {a["name"]: a for a in artifacts if a["type"] != "run_table"}
    model = by_name["actor-checkpoint"]
    assert model["type"] == "model"
    assert json.loads(model["metadata"])["tracking_core"]["name"] == "actor/checkpoint"
    (entry,) = model["manifest"]["contents"]
    assert entry["path"] == "model.pt" and sha256(Path(entry["local_path"])) == want_ckpt
    dump = by_name["actor-rollout-dump"]
    assert dump["type"] == "artifact"  # "job" is W&B's own
    assert json.loads(dump["metadata"])["tracking_core"]["kind"] == "job"
    got = {e["path"]: sha256(Path(e["local_path"])) for e in dump["manifest"]["contents"]}
    assert got == want_samples


# -- MLflow ---------------------------------------------------------------------------------------
def _download(client: Any, run_id: str, path: str, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    return Path(client.download_artifacts(run_id, path, str(dst)))


def _listing(client: Any, run_id: str, folder: str) -> list[str]:
    return sorted(Path(f.path).name for f in client.list_artifacts(run_id, folder))


def _mlflow_actor(server: MlflowServer, tmp: Path) -> tuple[Any, RunContext, dict[str, Any], Any]:
    """A job's run opened in ``server`` by its primary, and the actor's backend attached to it:
    (the actor's backend, its context, the run's handle entry, a client of the server)."""
    from mlflow import MlflowClient
    from tracking_mlflow import settings
    from tracking_mlflow.backend import MlflowBackend

    run_id = f"rich-mlflow-{os.getpid()}-{time.time_ns()}"
    primary = context(
        "mlflow", tmp, run_id, primary=True, options={"mlflow_tracking_uri": server.uri}
    )
    entry = MlflowBackend(primary).open_run(run=primary, target=settings.target(primary))
    actor = context("mlflow", tmp, run_id, primary=False, role=ROLE, label="actor-r0")
    backend = MlflowBackend(actor)
    backend.attach_run(actor, entry)
    return backend, actor, entry, MlflowClient(server.uri)


@pytest.mark.slow
@pytest.mark.integration
def test_mlflow_reads_back_every_kind_once(
    mlflow_server: MlflowServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("mlflow")
    from tracking_mlflow import media

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)  # for MLflow's load_table
    backend, actor, entry, client = _mlflow_actor(mlflow_server, tmp_path)
    mlrun = entry["run_id"]
    ckpt, samples = make_sources(tmp_path / "src")
    want_ckpt, want_samples = sha256(ckpt), tree_hashes(samples)

    first = table_record("rollout/samples", ROWS, 12)
    again = table_record("rollout/samples", ROWS[:1], 12)  # another table, the same step
    hist = histogram_record("rollout/rewards", VALUES, 12)
    note = text_record("rollout/sample_text", TEXT + "a Windows line\r\n", 12)
    with caplog.at_level(logging.WARNING, logger="tracking_core"):
        for record in (first, first, again, again):  # each offered twice (a retry)
            backend.log_table(record)
        backend.log_histogram(hist)
        backend.log_histogram(hist)
        backend.log_text(note)
        backend.log_text(note)
        arts = [
            artifact_record(ckpt, tmp_path / "snap", "checkpoint", "model"),
            artifact_record(samples, tmp_path / "snap", "rollout/dump", "samples"),
        ]
        for record in arts:
            backend.log_artifact(record)
            backend.log_artifact(record)  # a retry: stored once, in the same place
        ckpt.write_bytes(b"the next checkpoint")  # the same name logged again: a new path
        rotated = artifact_record(ckpt, tmp_path / "snap", "checkpoint", "model")
        backend.log_artifact(rotated)
        for record in (*arts, rotated):
            shutil.rmtree(record.path) if record.is_dir else os.remove(record.path)

    # tables: MLflow's own format and listing, one file per record
    folder = "tables/actor/rollout/samples"
    assert _listing(client, mlrun, folder) == ["step-000012-2.json", "step-000012.json"]
    doc = json.loads(
        _download(client, mlrun, f"{folder}/step-000012.json", tmp_path / "d1").read_text()
    )
    assert doc["columns"] == list(COLUMNS) and [tuple(r) for r in doc["data"]] == list(ROWS)
    loaded = client.load_table(
        entry["experiment_id"], f"{folder}/step-000012.json", run_ids=[mlrun]
    )
    assert list(loaded.columns) == list(COLUMNS) and len(loaded) == len(ROWS)  # not appended twice
    assert loaded["response"].tolist() == [r[1] for r in ROWS]
    assert (
        len(
            client.load_table(
                entry["experiment_id"], f"{folder}/step-000012-2.json", run_ids=[mlrun]
            )
        )
        == 1
    )

    # histogram: the artifact and the summary series on the same step, each once
    hdoc = json.loads(
        _download(
            client, mlrun, "histograms/actor/rollout/rewards/step-000012.json", tmp_path / "d2"
        ).read_text()
    )
    assert hdoc["counts"] == list(hist.counts) and hdoc["edges"] == pytest.approx(list(hist.edges))
    assert hdoc["count"] == len(VALUES)
    assert _listing(client, mlrun, "histograms/actor/rollout/rewards") == ["step-000012.json"]
    summary = hist.summary()
    for suffix in media.SUMMARY_SERIES:
        history = client.get_metric_history(mlrun, f"actor/rollout/rewards/{suffix}")
        assert [(m.step, m.value) for m in history] == [(12, pytest.approx(summary[suffix]))], suffix
    # the count is in the artifact, and the step axis is the step: neither is a series
    metrics = client.get_run(mlrun).data.metrics
    assert "actor/rollout/rewards/count" not in metrics and "actor/rollout/step" not in metrics

    # text
    assert _listing(client, mlrun, "texts/actor/rollout/sample_text") == ["step-000012.txt"]
    got = _download(
        client, mlrun, "texts/actor/rollout/sample_text/step-000012.txt", tmp_path / "d3"
    )
    assert got.read_bytes() == note.text.encode()  # byte for byte, \r\n included

    # artifacts: the bytes as logged; the name logged again went to a new path, with a warning
    assert _listing(client, mlrun, "artifacts/actor") == ["checkpoint", "checkpoint.v2", "rollout"]
    got = _download(client, mlrun, "artifacts/actor/checkpoint/model.pt", tmp_path / "d4")
    assert sha256(got) == want_ckpt
    got = _download(client, mlrun, "artifacts/actor/checkpoint.v2/model.pt", tmp_path / "d5")
    assert got.read_bytes() == b"the next checkpoint"
    got = _download(client, mlrun, "artifacts/actor/rollout/dump", tmp_path / "d6")
    assert tree_hashes(got) == want_samples
    tags = client.get_run(mlrun).data.tags
    assert json.loads(tags["tracking_core.artifact/artifacts/actor/checkpoint"])["kind"] == "model"
    messages = [r.getMessage() for r in caplog.records]
    assert sum("'actor/checkpoint' was logged before" in m for m in messages) == 1

    # a full mlflow.loggedArtifacts tag: later tables are still stored, with one warning
    listed = len(tags[media.LOGGED_ARTIFACTS_TAG])
    monkeypatch.setattr(media, "MAX_TAG_VALUE", listed + 60)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tracking_core"):
        for step in (13, 14, 15):
            backend.log_table(table_record("rollout/samples", ROWS, step))
    assert sum("is full" in r.getMessage() for r in caplog.records) == 1
    for step in (13, 14, 15):
        path = f"{folder}/step-{step:06d}.json"
        doc = json.loads(_download(client, mlrun, path, tmp_path / f"t{step}").read_text())
        assert [tuple(r) for r in doc["data"]] == list(ROWS)
    json.loads(client.get_run(mlrun).data.tags[media.LOGGED_ARTIFACTS_TAG])  # still valid JSON


@pytest.mark.integration
def test_mlflow_uploads_again_an_artifact_whose_upload_was_cut_short(
    mlflow_server: MlflowServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The path's tag is set while the files upload, so a tag naming the record does not prove
    they arrived: an upload that failed, or left a short file on the server, is done again in
    the same place when the record is offered again, here and by a replay in a new backend."""
    from tracking_mlflow.backend import MlflowBackend

    backend, actor, entry, client = _mlflow_actor(mlflow_server, tmp_path)
    mlrun = entry["run_id"]
    ckpt, samples = make_sources(tmp_path / "src")

    # 1. the snapshot cannot be read: the upload fails, the tag may be set; offered again, stored
    record = artifact_record(ckpt, tmp_path / "snap", "checkpoint", "model")
    hidden = Path(record.path + ".away")
    os.rename(record.path, hidden)
    with pytest.raises(OSError):
        backend.log_artifact(record)
    os.rename(hidden, record.path)
    backend.log_artifact(record)
    got = _download(client, mlrun, "artifacts/actor/checkpoint/model.pt", tmp_path / "d1")
    assert sha256(got) == sha256(ckpt)

    # 2. the server kept a short file (an upload cut off): the same record, offered again by a
    # new backend as a replay would, replaces it; nothing goes to a new path
    dump = artifact_record(samples, tmp_path / "snap", "rollout/dump", "samples")
    short = tmp_path / "short"
    shutil.copytree(dump.path, short)
    (short / "part" / "b.bin").write_bytes(b"cut")
    os.remove(short / "a.jsonl")
    backend.log_artifact(dataclasses.replace(dump, path=str(short)))
    stored = _download(client, mlrun, "artifacts/actor/rollout/dump", tmp_path / "d2")
    assert tree_hashes(stored) != tree_hashes(samples)  # what the cut upload left
    replay = MlflowBackend(actor)
    replay.attach_run(actor, entry)
    replay.log_artifact(dump)
    stored = _download(client, mlrun, "artifacts/actor/rollout/dump", tmp_path / "d3")
    assert tree_hashes(stored) == tree_hashes(samples)
    assert _listing(client, mlrun, "artifacts/actor") == ["checkpoint", "rollout"]
    assert _listing(client, mlrun, "artifacts/actor/rollout") == ["dump"]


# -- TensorBoard ----------------------------------------------------------------------------------
def _tb_tensors(run_dir: Path, plugin: str) -> dict[str, list[tuple[int, Any]]]:
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    acc.Reload()
    try:
        tags = acc.PluginTagToContent(plugin)
    except KeyError:
        return {}
    return {
        tag: [(e.step, tensor_util.make_ndarray(e.tensor_proto)) for e in acc.Tensors(tag)]
        for tag in tags
    }


def _tb_text(value: Any) -> str:
    return "\n".join(b.decode() if isinstance(b, bytes) else str(b) for b in value.flat)


@pytest.mark.integration
def test_tensorboard_reads_back_every_kind(tmp_path: Path) -> None:
    pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    from tensorboard.plugins.text.text_plugin import text_array_to_html
    from tracking_tensorboardx.backend import TensorBoardBackend
    from tracking_tensorboardx.media import text_of_markdown

    ctx = context("tensorboard", tmp_path, "rich-tb-1", primary=False, role=ROLE)
    backend = TensorBoardBackend(ctx)
    logdir = Path(backend.attach_run(ctx, {"logdir": str(tmp_path / "tb")})["logdir"])
    ckpt, samples = make_sources(tmp_path / "src")
    want_ckpt = sha256(ckpt)

    backend.log_table(table_record("rollout/samples", ROWS, 3))
    backend.log_table(table_record("rollout/samples", ROWS[:1], None))  # no step: the next one
    hist = histogram_record("rollout/rewards", VALUES, 3)
    backend.log_histogram(hist)
    backend.log_text(text_record("rollout/sample_text", TEXT, 3))
    arts = [
        artifact_record(ckpt, tmp_path / "snap", "checkpoint", "model"),
        artifact_record(samples, tmp_path / "snap", "rollout/dump", "samples"),
    ]
    sums = [record.sha256() for record in arts]
    for record in arts:
        backend.log_artifact(record)
    backend.close_run(RunStatus.FINISHED)

    run_dir = logdir / "actor"  # the role is the run; tags are unprefixed
    hists = _tb_tensors(run_dir, "histograms")
    ((step, buckets),) = hists["rollout/rewards"]
    assert step == 3
    nonempty = [c for c in hist.counts]
    while nonempty and nonempty[0] == 0:
        nonempty.pop(0)
    while nonempty and nonempty[-1] == 0:
        nonempty.pop()
    assert [int(c) for c in buckets[:, 2]] == nonempty  # TensorBoard drops empty outer bins
    assert buckets[0, 0] == pytest.approx(min(VALUES)) and buckets[-1, 1] == pytest.approx(
        max(VALUES)
    )

    texts = _tb_tensors(run_dir, "text")
    samples_events = texts["rollout/samples"]
    assert [s for s, _ in samples_events] == [3, 4]
    shown = text_array_to_html(samples_events[0][1], enable_markdown=True)
    assert shown.count("<tr>") == len(ROWS) + 1
    assert html.escape("<think>2*3 = 6</think>", quote=False) in shown
    ((step, value),) = texts["rollout/sample_text"]
    assert step == 3 and text_of_markdown(_tb_text(value)) == TEXT

    notes = {  # as TensorBoard shows them
        tag: text_array_to_html(events[0][1], enable_markdown=True)
        for tag, events in texts.items()
        if tag.startswith("artifacts/")
    }
    assert set(notes) == {"artifacts/checkpoint", "artifacts/rollout/dump"}
    assert sums[0] == want_ckpt and sums[0] in notes["artifacts/checkpoint"]
    assert "300000 B" in notes["artifacts/checkpoint"] and "model" in notes["artifacts/checkpoint"]
    assert sums[1] in notes["artifacts/rollout/dump"] and "b.bin" in notes["artifacts/rollout/dump"]


# -- one job, three writers, three trackers at once -----------------------------------------------
HF_TOKEN = "hf_" + "Qz7xK2mP9vL4tR8wN3bY6cJ1hF5dS0aGeU"  # hf_ + 34 alphanumerics
SK_TOKEN = "sk-" + "Xa9Lm2Qw7Er4Ty1Ui8Op3As6Df0Gh5Jk2Zx9Cv4B"  # sk- + 40 characters
URL = "https://user:pass@host/x"
PLANTED = (HF_TOKEN, SK_TOKEN, "user:pass@", "Qz7xK2mP9vL4tR8wN3bY", "Xa9Lm2Qw7Er4Ty1Ui8Op")
WRITERS = {"": None, "actor": "actor", "critic": "critic"}  # prefix -> role
E2E_STEPS = (0, 1)


def e2e_rows(role: str, step: int) -> list[dict[str, Any]]:
    return [
        {
            "prompt": f"{role} prompt {step}-{i}",
            "response": f"answer {i}: use {HF_TOKEN} and {SK_TOKEN} at {URL}"
            if i == 0
            else f"ok {i}",
            "reward": 0.5 * i - step,
            "length": 10 * i + step,
            "truncated": i == 2,
            "label": None if i == 1 else f"l{i}",
        }
        for i in range(3)
    ]


def e2e_values(role: str, step: int) -> list[float]:
    rng = np.random.default_rng(len(role) * 10 + step)
    return [float(v) for v in rng.normal(step, 1.0, size=200)]


def e2e_text(role: str, step: int) -> str:
    return f"{role} note {step}\nkey {HF_TOKEN} / {SK_TOKEN}\nsee {URL}\n"


def _clean(cell: Any) -> Any:
    return cell


def _assert_cells(
    role: str, step: int, columns: Sequence[str], data: Sequence[Sequence[Any]]
) -> None:
    """Every row and cell as logged; the planted secrets redacted out of the secret cell."""
    expected = e2e_rows(role, step)
    assert list(columns) == list(expected[0])
    assert len(data) == len(expected)
    for got, want in zip(data, expected, strict=True):
        for column, cell in zip(columns, got, strict=True):
            if column == "response" and "answer" in str(want[column]):
                assert isinstance(cell, str) and cell.startswith("answer 0: use <redacted")
                assert not any(s in cell for s in PLANTED) and "@host/x" in cell
            else:
                assert cell == want[column], (role, step, column, cell)


def _assert_text(role: str, step: int, text: str) -> None:
    assert text.startswith(f"{role} note {step}\nkey <redacted"), text
    assert not any(s in text for s in PLANTED) and "@host/x" in text


def _nonempty(counts: Sequence[int]) -> list[int]:
    out = [int(c) for c in counts]
    while out and out[0] == 0:
        out.pop(0)
    while out and out[-1] == 0:
        out.pop()
    return out


@pytest.mark.slow
@pytest.mark.integration
def test_every_kind_from_three_writers_in_three_trackers(
    mlflow_server: MlflowServer,  # noqa: F811
    wandb_env: Path,
    tmp_path: Path,
) -> None:
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboardX")
    from mlflow import MlflowClient
    from tensorboard.plugins.text.text_plugin import text_array_to_html
    from tracking_tensorboardx.media import text_of_markdown
    from tracking_wandb.media import text_of_html

    import tracking_core
    from tests.helpers.wandb_offline import count_files, grep_files

    src = tmp_path / "src"
    src.mkdir()
    run = tracking_core.start_run(
        config={"lr": 1e-6},
        backends=["mlflow", "wandb", "tensorboard"],
        tracking_dir=tmp_path / "td",
        options={"mlflow_tracking_uri": mlflow_server.uri},
        export=False,
    )
    # Let every tracker open the job's run first: a role finishing before the primary's
    # MLflow run exists leaves its records for `sync` (what this test checks is delivery).
    assert run.flush(180)
    writers = {"": run}
    for role in ("actor", "critic"):
        writers[role] = tracking_core.attach(run.handle, role=role, writer=True, collect=False)
    for role, writer in writers.items():
        name = role or "launch"
        for step in E2E_STEPS:
            writer.log_table(
                "rollout/samples", e2e_rows(name, step), step=step, step_key="rollout/step"
            )
            writer.log_histogram(
                "rollout/rewards",
                e2e_values(name, step),
                step=step,
                step_key="rollout/step",
                bins=8,
            )
            writer.log_text(
                "rollout/note", e2e_text(name, step), step=step, step_key="rollout/step"
            )
    # the actor's checkpoint, replaced (rotation) and then deleted right after log_artifact
    ckpt = src / "latest.pt"
    ckpt.write_bytes(os.urandom(200_000))
    want_ckpt = sha256(ckpt)
    writers["actor"].log_artifact(ckpt, name="checkpoint", kind="model")
    (src / "next.pt").write_bytes(b"the next checkpoint")
    os.replace(src / "next.pt", ckpt)
    ckpt.unlink()
    # the critic's samples directory, deleted right after; the driver's plot
    dump = src / "dump"
    (dump / "sub").mkdir(parents=True)
    (dump / "a.jsonl").write_text('{"x": 1}\n')
    (dump / "sub" / "b.bin").write_bytes(os.urandom(5000))
    want_dump = tree_hashes(dump)
    writers["critic"].log_artifact(dump, kind="samples")
    shutil.rmtree(dump)
    plot = src / "plot.svg"
    plot.write_text("<svg/>")
    run.log_artifact(plot)
    for role in ("actor", "critic", ""):
        summary = writers[role].finish(180)  # a loaded 2-core machine can be slow
        for name, info in summary.backends.items():
            assert not info["failures"] and not info["undelivered"], (role, name, summary)

    handle = run.handle.backends
    client = MlflowClient(mlflow_server.uri)
    mlrun = handle["mlflow"]["run_id"]
    wb_runs = read_job(wandb_env / "wandb-root", handle["wandb"]["id"])
    assert len(wb_runs) == 3
    logdir = Path(handle["tensorboard"]["logdir"])

    def wb_run(role: str) -> Any:
        (found,) = [r for r in wb_runs if (r.suffix.split("-r")[0] if r.suffix else "") == role]
        return found

    for role in WRITERS:
        name = role or "launch"
        prefix = f"{role}/" if role else ""
        wb = wb_run(role)
        wb_rows = {
            (k.rsplit(".", 1)[0], row[f"{prefix}rollout/step"]): row
            for row in wb.history
            for k in row
            if k.endswith("._type")
        }
        tb_dir = logdir / (role or "launch")
        tb_text = _tb_tensors(tb_dir, "text")
        tb_hist = _tb_tensors(tb_dir, "histograms")
        for step in E2E_STEPS:
            # tables
            path = f"tables/{prefix}rollout/samples/step-{step:06d}.json"
            doc = json.loads(_download(client, mlrun, path, tmp_path / "ml" / name).read_text())
            _assert_cells(name, step, doc["columns"], doc["data"])
            item = _wandb_item(
                wb_rows[(f"{prefix}rollout/samples", step)], f"{prefix}rollout/samples"
            )
            doc = json.loads((wb.path / "files" / item["path"]).read_text())
            _assert_cells(name, step, doc["columns"], doc["data"])
            ((tb_step, value),) = [e for e in tb_text["rollout/samples"] if e[0] == step]
            shown = text_array_to_html(value, enable_markdown=True)
            assert shown.count("<tr>") == 4 and f"{name} prompt {step}-2" in shown
            # histograms: the same counts in all three
            counts, _ = np.histogram(np.asarray(e2e_values(name, step)), bins=8)
            path = f"histograms/{prefix}rollout/rewards/step-{step:06d}.json"
            hdoc = json.loads(_download(client, mlrun, path, tmp_path / "ml" / name).read_text())
            assert hdoc["counts"] == [int(c) for c in counts]
            mean = client.get_metric_history(mlrun, f"{prefix}rollout/rewards/mean")
            assert [m.value for m in mean if m.step == step] == [
                pytest.approx(float(np.mean(e2e_values(name, step))))
            ]
            item = _wandb_item(
                wb_rows[(f"{prefix}rollout/rewards", step)], f"{prefix}rollout/rewards"
            )
            assert item["values"] == [int(c) for c in counts]
            ((_, buckets),) = [e for e in tb_hist["rollout/rewards"] if e[0] == step]
            assert [int(c) for c in buckets[:, 2]] == _nonempty(counts)
            # texts
            path = f"texts/{prefix}rollout/note/step-{step:06d}.txt"
            _assert_text(
                name, step, _download(client, mlrun, path, tmp_path / "ml" / name).read_text()
            )
            item = _wandb_item(wb_rows[(f"{prefix}rollout/note", step)], f"{prefix}rollout/note")
            _assert_text(name, step, text_of_html((wb.path / "files" / item["path"]).read_text()))
            ((_, value),) = [e for e in tb_text["rollout/note"] if e[0] == step]
            _assert_text(name, step, text_of_markdown(_tb_text(value)))

    # artifacts: the bytes as logged, though replaced and deleted right after
    got = _download(client, mlrun, "artifacts/actor/checkpoint/latest.pt", tmp_path / "a1")
    assert sha256(got) == want_ckpt
    assert (
        tree_hashes(_download(client, mlrun, "artifacts/critic/dump", tmp_path / "a2")) == want_dump
    )
    assert (
        _download(client, mlrun, "artifacts/plot.svg/plot.svg", tmp_path / "a3").read_text()
        == "<svg/>"
    )

    def wb_artifact(role: str, name: str) -> dict[str, str]:
        arts = [r["artifact"] for r in wb_run(role).records if r.get("type") == "artifact"]
        (art,) = [a for a in arts if a["name"] == name]
        return {e["path"]: sha256(Path(e["local_path"])) for e in art["manifest"]["contents"]}

    assert wb_artifact("actor", "actor-checkpoint") == {"latest.pt": want_ckpt}
    assert wb_artifact("critic", "critic-dump") == want_dump
    note = _tb_tensors(logdir / "actor", "text")["artifacts/checkpoint"]
    assert want_ckpt in text_array_to_html(note[0][1], enable_markdown=True)

    # the planted secrets: in no file any tracker wrote (nor in the journal)
    roots = [tmp_path, mlflow_server.root]
    assert sum(count_files(r) for r in roots) > 20
    for secret in PLANTED:
        hits = [p for r in roots for p in grep_files(r, secret)]
        assert hits == [], f"{secret[:8]}... found in {hits}"
