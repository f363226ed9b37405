"""The rich kinds in MLflow: tables, histograms, texts and artifacts, as run artifacts.

* **Tables** go through ``MlflowClient.log_table``: MLflow's own table format (pandas'
  ``orient="split"`` JSON) and the run tag ``mlflow.loggedArtifacts`` that makes MLflow's UI show
  the file as a table. One file per key and step: ``tables/<key>/step-000012.json``. Cells are
  kept as logged (an object-typed frame: ``1`` stays ``1``, never ``1.0``).
* **Histograms** go to ``histograms/<key>/step-000012.json`` (bins, edges and the exact summary:
  count, sum, every percentile) and the statistics a reader follows step by step to metric
  series on the same step (:data:`SUMMARY_SERIES`: ``<key>/mean``, ``/min``, ``/max``, ``/p5``,
  ``/p50``, ``/p95``), through the backend's own metric path: same key shaping, same
  exactly-once timestamps. MLflow draws a chart for every metric key, so the count (mostly the
  batch size: a flat line), ``p25``/``p75`` and the sum stay in the artifact only.
* **Texts** go to ``texts/<key>/step-000012.txt`` with ``MlflowClient.log_text``.
* **Artifacts**: a file with ``log_artifact``, a directory with ``log_artifacts``, under
  ``artifacts/<name>`` (a file keeps its own name: ``artifacts/actor/ckpt/model.pt``). The run
  tag ``tracking_core.artifact/<path>`` records which logged artifact goes there (kind, size,
  source, when logged); it is set while the upload runs (two requests at once, not one after
  the other), so it claims the path rather than proving the files arrived.

**Exactly once.** A record may be offered again (a worker retry after a lost reply, a journal
replay by ``sync``), and MLflow's ``log_table`` *appends* to a table file that exists. So a file
is written only where its path is free; where it is taken, the stored bytes are compared with
the record's: the same bytes mean it is stored already, other bytes (a second table logged at
the same key and step) move it to the next free name (``step-000012-2.json``). An artifact path
is taken when its tag names another record; a name logged again goes to ``artifacts/<name>.v2``
and on (MLflow has no artifact versions), with a warning that says where. Where the tag names
this very record, its files are listed: all there with their sizes means stored; anything
missing or short (an upload cut off) has it uploaded again to the same path.

**Limits.** Artifact paths take no ``" ' , : [ ] { }`` (``log_table`` refuses them) and no
empty, ``.`` or ``..`` parts: a name holding any of them is renamed by the key rule, with the
hash of the name (:func:`tracking_mlflow.keys.mlflow_path`), so two names never share a folder. The ``mlflow.loggedArtifacts`` tag
holds at most 8000 characters (MLflow cuts a longer value, which breaks its JSON and with it
every later ``log_table``): once it is full, later tables are written in the same format with
``log_text`` and named in one warning (MLflow's UI shows those as JSON files). MLflow's UI
previews files up to 50 MiB: a larger table or text is stored whole, with a warning.
"""

from __future__ import annotations

import json
import logging
import math
import os
import posixpath
import shutil
import tempfile
from collections.abc import Mapping
from concurrent import futures
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracking_core.plugin_api import (
    ArtifactRecord,
    HistogramRecord,
    MetricRecord,
    TableRecord,
    TextRecord,
)

from .keys import mlflow_path, mlflow_tag_key

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from .backend import MlflowBackend

log = logging.getLogger("tracking_core.mlflow")

TABLES_DIR = "tables"
HISTOGRAMS_DIR = "histograms"
#: The histogram statistics logged as metric series, in this order: the centre, the range, and
#: the tails and median a reward distribution is read by. The artifact holds the rest.
SUMMARY_SERIES = ("mean", "min", "max", "p5", "p50", "p95")
TEXTS_DIR = "texts"
ARTIFACTS_DIR = "artifacts"
#: The run tag MLflow lists table artifacts in (``mlflow.utils.mlflow_tags``).
LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"
#: Prefix of the run tags that say which logged artifact a path holds.
ARTIFACT_TAG = "tracking_core.artifact/"
MAX_TAG_VALUE = 8000
#: The largest file MLflow's UI previews ("Maximum file size for preview: 50MiB").
UI_PREVIEW_BYTES = 50 * 1024 * 1024


# -- paths ---------------------------------------------------------------------------------------
def artifact_dir(name: str) -> str:
    """A logged name as a run-relative artifact folder MLflow accepts
    (:func:`tracking_mlflow.keys.mlflow_path`: the metric key rule, none of the characters
    ``log_table`` refuses, no empty, ``.`` or ``..`` part). Pure: the same name gives the same
    folder in every process, and two names never share one."""
    return mlflow_path(name)


def step_stem(step: int | None) -> str:
    """``step-000012``; a record without a step is at step 0, as MLflow's metrics are."""
    return f"step-{0 if step is None else int(step):06d}"


def numbered(stem: str, ext: str, n: int) -> str:
    return f"{stem}{ext}" if n == 1 else f"{stem}-{n}{ext}"


# -- payloads (pure) -----------------------------------------------------------------------------
def table_frame(record: TableRecord) -> Any:
    """The record as the pandas frame ``log_table`` takes (cells as logged: object dtype)."""
    import pandas as pd

    return pd.DataFrame(
        [list(row) for row in record.rows], columns=list(record.columns), dtype=object
    )


def table_json(frame: Any) -> str:
    """What ``log_table`` writes for ``frame`` (its own ``to_json`` call)."""
    return str(frame.to_json(orient="split", index=False, date_format="iso"))


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def histogram_json(record: HistogramRecord) -> str:
    """The histogram artifact: bins, edges and the exact summary (JSON; a non-finite summary
    value, as ``mean`` of no values, is ``null``)."""
    doc = {
        "name": record.name,
        "key": record.key,
        "role": record.role,
        "step": record.step,
        "step_key": record.step_key,
        "timestamp": record.timestamp,
        "counts": list(record.counts),
        "edges": list(record.edges),
        "count": record.count,
        "non_finite": record.non_finite,
        "summary": {
            "min": _finite(record.min),
            "max": _finite(record.max),
            "sum": _finite(record.sum),
            "sum_squares": _finite(record.sum_squares),
            "mean": _finite(record.mean),
            "percentiles": {k: _finite(v) for k, v in record.percentiles.items()},
        },
    }
    return json.dumps(doc, indent=1, allow_nan=False)


def summary_records(record: HistogramRecord) -> list[MetricRecord]:
    """The histogram's :data:`SUMMARY_SERIES` as metric records on its step (``<key>/mean`` ...);
    the count and the other percentiles are in the artifact (:func:`histogram_json`)."""
    summary = record.summary()
    return [
        MetricRecord(
            key=f"{record.key}/{suffix}",
            value=float(value),
            step=record.step,
            timestamp=record.timestamp,
            seq=record.seq,
            role=record.role,
            prefix=record.prefix,
            step_key=record.step_key,
        )
        for suffix, value in ((name, summary[name]) for name in SUMMARY_SERIES if name in summary)
    ]


# -- the writer ----------------------------------------------------------------------------------
class MlflowMedia:
    """The rich kinds for one :class:`~tracking_mlflow.backend.MlflowBackend` (its client, run
    and metric path); remembers which warnings it gave."""

    def __init__(self, backend: MlflowBackend) -> None:
        self.backend = backend
        self._warned: set[tuple[str, str]] = set()
        # The run's tags as this writer last read them and then changed them itself: read once
        # per run for the artifacts' tags rather than before every artifact (a request each).
        self._tags: tuple[str, dict[str, str]] | None = None
        # Runs an artifact's tag request while the artifact uploads.
        self._side = futures.ThreadPoolExecutor(1, thread_name_prefix="tracking-core-mlflow-tag")

    def _warn_once(self, kind: str, key: str, message: str, *args: Any) -> None:
        if (kind, key) not in self._warned:
            self._warned.add((kind, key))
            log.warning(message, *args)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return self.backend._call(fn, *args, **kwargs)

    def _stored_bytes(self, client: MlflowClient, run_id: str, path: str) -> bytes | None:
        with tempfile.TemporaryDirectory(prefix="tracking-core-mlflow-") as tmp:
            local = self._call(client.download_artifacts, run_id, path, tmp)
            try:
                return Path(local).read_bytes()
            except OSError:  # a folder where a file was expected
                return None

    def _place(
        self, client: MlflowClient, run_id: str, folder: str, stem: str, ext: str, payload: str
    ) -> tuple[str, bool]:
        """Where ``payload`` goes in ``folder``: the first free ``stem[-n]ext``, or the one
        already holding exactly ``payload`` (then True: nothing to write)."""
        taken = {
            posixpath.basename(f.path) for f in self._call(client.list_artifacts, run_id, folder)
        }
        n = 1
        while True:
            name = numbered(stem, ext, n)
            path = f"{folder}/{name}"
            if name not in taken:
                return path, False
            if self._stored_bytes(client, run_id, path) == payload.encode("utf-8"):
                return path, True
            n += 1

    def _check_preview(self, kind: str, name: str, path: str, payload: str) -> None:
        size = len(payload.encode("utf-8", "surrogatepass"))
        if size > UI_PREVIEW_BYTES:
            self._warn_once(
                f"{kind}-preview",
                name,
                "MLflow: %s %r is %.0f MiB at %s; it is stored whole, but MLflow's UI previews "
                "files up to 50 MiB only (download it to look at it)",
                kind,
                name,
                size / 2**20,
                path,
            )

    # -- tables ------------------------------------------------------------------------------------
    def _listed_tables(self, client: MlflowClient, run_id: str) -> list[Any] | None:
        """The ``mlflow.loggedArtifacts`` tag's entries; None where MLflow cut it already."""
        raw = self._call(client.get_run, run_id).data.tags.get(LOGGED_ARTIFACTS_TAG, "[]")
        try:
            listed = json.loads(raw)
        except ValueError:
            return None
        return listed if isinstance(listed, list) else None

    @staticmethod
    def _with(listed: list[Any], path: str) -> str | None:
        """The tag listing ``path`` too, or None where that does not fit."""
        text = json.dumps([*listed, {"path": path, "type": "table"}])
        return text if len(text) <= MAX_TAG_VALUE else None

    def _ensure_listed(self, client: MlflowClient, run_id: str, path: str) -> None:
        """List ``path`` in the tag (again, where another writer's tag update replaced ours),
        or say once that the tag is full."""
        entry = {"path": path, "type": "table"}
        for _ in range(3):
            listed = self._listed_tables(client, run_id)
            if listed is not None and entry in listed:
                return
            text = None if listed is None else self._with(listed, path)
            if text is None:
                break
            self._call(client.set_tag, run_id, LOGGED_ARTIFACTS_TAG, text)
        self._warn_once(
            "table-tag",
            "",
            "MLflow: the run tag %s, which lists the files MLflow's UI shows as tables, is full "
            "(%d characters); %s and later tables are stored in MLflow's table format but "
            "shown as JSON files",
            LOGGED_ARTIFACTS_TAG,
            MAX_TAG_VALUE,
            path,
        )

    def log_table(self, record: TableRecord) -> None:
        client, run_id = self.backend._need_run()
        frame = table_frame(record)
        payload = table_json(frame)
        folder = f"{TABLES_DIR}/{artifact_dir(record.name)}"
        path, stored = self._place(client, run_id, folder, step_stem(record.step), ".json", payload)
        if not stored:
            listed = self._listed_tables(client, run_id)
            if listed is not None and self._with(listed, path) is not None:
                # The path is free, so log_table writes it (it appends only to a file that exists).
                self._call(client.log_table, run_id, data=frame, artifact_file=path)
            else:
                self._call(client.log_text, run_id, payload, path)
        self._ensure_listed(client, run_id, path)
        self._check_preview("table", record.name, path, payload)

    # -- histograms --------------------------------------------------------------------------------
    def log_histogram(self, record: HistogramRecord) -> None:
        client, run_id = self.backend._need_run()
        self.backend.log_metrics(summary_records(record))
        payload = histogram_json(record)
        folder = f"{HISTOGRAMS_DIR}/{artifact_dir(record.name)}"
        path, stored = self._place(client, run_id, folder, step_stem(record.step), ".json", payload)
        if not stored:
            self._call(client.log_text, run_id, payload, path)

    # -- texts -------------------------------------------------------------------------------------
    def log_text(self, record: TextRecord) -> None:
        client, run_id = self.backend._need_run()
        folder = f"{TEXTS_DIR}/{artifact_dir(record.name)}"
        path, stored = self._place(
            client, run_id, folder, step_stem(record.step), ".txt", record.text
        )
        if not stored:
            self._call(client.log_text, run_id, record.text, path)
        self._check_preview("text", record.name, path, record.text)

    # -- artifacts ---------------------------------------------------------------------------------
    @staticmethod
    def _identity(record: ArtifactRecord) -> dict[str, Any]:
        return {
            "name": record.name,
            "kind": record.kind,
            "role": record.role,
            "timestamp": record.timestamp,
            "seq": record.seq,
            "size": record.size,
            "files": len(record.files),
            "source": record.source,
        }

    @staticmethod
    def _same(tag: str, identity: Mapping[str, Any]) -> bool:
        try:
            doc = json.loads(tag)
        except ValueError:
            return False
        keys = ("name", "role", "timestamp", "seq")
        return isinstance(doc, dict) and all(doc.get(k) == identity[k] for k in keys)

    def seed(self, run_id: str, tags: Mapping[str, str]) -> None:
        """The tags of the run as the backend just created, found or attached it (its first
        artifact then needs no request to read them)."""
        self._tags = (run_id, dict(tags))

    def _run_tags(self, client: MlflowClient, run_id: str) -> dict[str, str]:
        if self._tags is None or self._tags[0] != run_id:
            self._tags = (run_id, dict(self._call(client.get_run, run_id).data.tags))
        return self._tags[1]

    def log_artifact(self, record: ArtifactRecord) -> None:
        client, run_id = self.backend._need_run()
        try:
            self._log_artifact(client, run_id, record)
        except BaseException:
            self._tags = None  # read them again: the call may have got further than we know
            raise

    def _log_artifact(self, client: MlflowClient, run_id: str, record: ArtifactRecord) -> None:
        """Under ``artifacts/<name>``, the first free ``<name>.v<n>`` when the name was logged
        before; nothing when this very record is stored already (a retry, a replay). The path's
        tag says who logged the artifact when: that is how a retry or a replay recognises it,
        and it is set while the files upload. Only this role's writer logs artifacts of its
        names, so the run's tags are read once (a replay, in another process, reads them
        afresh)."""
        base = f"{ARTIFACTS_DIR}/{artifact_dir(record.name)}"
        identity = self._identity(record)
        tags = self._run_tags(client, run_id)
        n = 1
        while True:
            path = base if n == 1 else f"{base}.v{n}"
            tag = tags.get(mlflow_tag_key(ARTIFACT_TAG + path))
            if tag is None:
                break
            if self._same(tag, identity):
                # Claimed by this record before: stored, unless that upload was cut short.
                if not self._stored_whole(client, run_id, record, path):
                    self._upload(client, run_id, record, path)
                return
            n += 1
        if n > 1:
            log.warning(
                "MLflow: artifact %r was logged before in run %s; MLflow keeps one file per "
                "path, so this one (logged at %s) is stored under %s",
                record.name,
                run_id,
                datetime.fromtimestamp(record.timestamp).isoformat(sep=" ", timespec="milliseconds"),
                path,
            )
        text = json.dumps(identity, sort_keys=True)
        if len(text) > MAX_TAG_VALUE:
            identity["source"] = record.source[:200] + " …"
            text = json.dumps(identity, sort_keys=True)
        key = mlflow_tag_key(ARTIFACT_TAG + path)
        claim = self._side.submit(self._call, client.set_tag, run_id, key, text)
        try:
            self._upload(client, run_id, record, path)
        except BaseException:
            futures.wait([claim])  # the upload's error is the one to report
            raise
        claim.result()  # raises what the tag's request raised (the record is offered again)
        tags[key] = text

    def _stored_whole(
        self, client: MlflowClient, run_id: str, record: ArtifactRecord, path: str
    ) -> bool:
        """Whether every file of ``record`` is under ``path`` with the size it was logged with."""
        stored: dict[str, int | None] = {}
        folders = [path]
        while folders:
            for info in self._call(client.list_artifacts, run_id, folders.pop()):
                if info.is_dir:
                    folders.append(info.path)
                else:
                    stored[info.path] = info.file_size
        return all(stored.get(f"{path}/{rel}") == size for rel, size in record.files)

    def _upload(self, client: MlflowClient, run_id: str, record: ArtifactRecord, path: str) -> None:
        if record.is_dir:
            self._call(client.log_artifacts, run_id, record.path, path)
            return
        filename = record.files[0][0] if record.files else os.path.basename(record.path)
        if os.path.basename(record.path) == filename:
            self._call(client.log_artifact, run_id, record.path, path)
            return
        # The snapshot has another name than the file logged: upload it under the file's name.
        with tempfile.TemporaryDirectory(prefix="tracking-core-mlflow-") as tmp:
            staged = os.path.join(tmp, filename)
            try:
                os.link(record.path, staged)
            except OSError:
                shutil.copyfile(record.path, staged)
            self._call(client.log_artifact, run_id, staged, path)
