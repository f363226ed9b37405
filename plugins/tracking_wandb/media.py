"""The rich kinds as W&B media: tables, histograms, texts and artifacts.

Each record becomes one ``run.log`` row on the record's step axis, as a metric does (see
:mod:`tracking_wandb.rows`): ``{name: <media>, axis: step, "_timestamp": timestamp}``, with
``define_metric(name, step_metric=axis)``, so a table logged on ``rollout/step`` lines up with the
metrics of that step and W&B's own ``_step`` is never set.

* **Tables** are ``wandb.Table`` (``IMMUTABLE``: one table per record). W&B writes a table twice:
  into the run's media file (``media/table/...table.json``, which W&B cuts at
  ``wandb.Table.MAX_ROWS`` without a word) and into a ``run_table`` artifact (at most
  ``wandb.Table.MAX_ARTIFACT_ROWS``, where W&B may raise in strict mode). Rows beyond the
  artifact limit are cut here, and a table over either limit is named in one warning per key.
  A column mixing types W&B cannot unify (numbers and strings) is logged with mixed types
  allowed instead of failing.
* **Histograms** are ``wandb.Histogram(np_histogram=(counts, edges))``; more bins than W&B's
  ``Histogram.MAX_LENGTH`` are merged (neighbouring bins added up), with a warning.
* **Keys of tables and texts** are file paths in W&B (``media/table/<key>_<step>_<id>.table.json``,
  and the ``run_table`` artifact's entry), which W&B refuses for a key with a ``..`` or empty
  part or a leading ``/``: such a record would wait for ever. These keys are therefore shaped by
  :func:`tracking_core.names.path_under` (each ``/``-separated part a safe file name, with one
  warning naming the key W&B shows instead); every other key, and every histogram's and
  metric's, is logged as given.
* **Texts** are ``wandb.Html`` documents holding the text escaped in a ``<pre>`` block: W&B's
  media panel steps through them like images, shows long and multi-line texts whole and
  verbatim, and model output (``<think>``, HTML, markdown) is shown as written, never rendered.
  A string in a history row would show only as its last value in the summary; a one-column
  table per text would show a cell cut to the panel's width.
* **Artifacts** are ``wandb.Artifact`` (type = the record's kind, name shaped by
  :func:`artifact_name`), the file added under its own name or the directory with
  ``add_dir``, then ``run.log_artifact``. W&B copies every file into its staging directory
  while the artifact is built (its default, mutable policy), so what W&B uploads, now or at a
  later ``wandb sync``, no longer depends on the snapshot, which may be removed once every
  backend has it. Logging a name again makes a new version of the artifact, as in W&B.
"""

from __future__ import annotations

import hashlib
import html
import logging
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import wandb

from tracking_core.names import path_under
from tracking_core.plugin_api import ArtifactRecord, HistogramRecord, TableRecord, TextRecord
from tracking_core.rows import StepRow, axis_of

from .rows import TIMESTAMP_KEY

if TYPE_CHECKING:
    from tracking_core.shared_run import SharedRun

    from .backend import WandbBackend

log = logging.getLogger("tracking_core.backends.wandb")

#: W&B's artifact name rule: letters, digits, ``-``, ``_`` and ``.``, at most 128 characters.
ARTIFACT_NAME_MAX = 128
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")
#: Artifact types W&B keeps for itself (``validate_artifact_type``): a kind among them (or one
#: starting with ``wandb-``) is logged as type ``artifact``, the kind kept in the metadata.
_RESERVED_TYPES = ("job", "run_table", "code")
_TYPE_BAD = re.compile(r"[/:]")

TEXT_STYLE = "white-space: pre-wrap; word-break: break-word; font-family: monospace;"

#: ``(what, name)`` of the limits already warned about in this process: one warning per key.
_warned: set[tuple[str, str]] = set()


def _warn_once(what: str, name: str, message: str, *args: object) -> None:
    if (what, name) in _warned:
        log.debug(message, *args)
        return
    _warned.add((what, name))
    log.warning(message + " (said once per key)", *args)


# -- names ---------------------------------------------------------------------------------------
def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def artifact_name(name: str) -> str:
    """``name`` as a W&B artifact name: ``/`` becomes ``-`` (``actor/ckpt`` -> ``actor-ckpt``),
    any other character outside ``[A-Za-z0-9_.-]`` becomes ``_``; a name over 128 characters is
    cut and ends with ``-`` and 8 hex digits of its SHA-256; an empty one is ``artifact``.
    Pure: the same name is shaped the same way in every process."""
    shaped = _NAME_BAD.sub("_", name.replace("/", "-")).strip("-") or "artifact"
    if len(shaped) > ARTIFACT_NAME_MAX:
        suffix = "-" + _short_hash(name)
        shaped = shaped[: ARTIFACT_NAME_MAX - len(suffix)] + suffix
    return shaped


def artifact_type(kind: str) -> str:
    """``kind`` as a W&B artifact type (no ``/`` or ``:``, at most 128 characters, none of the
    types W&B reserves); ``artifact`` where nothing of it is usable."""
    typ = _TYPE_BAD.sub("-", kind)[:ARTIFACT_NAME_MAX].strip() or "artifact"
    if typ in _RESERVED_TYPES or typ.startswith("wandb-"):
        return "artifact"
    return typ


# -- building W&B objects -----------------------------------------------------------------------
def wandb_table(record: TableRecord) -> Any:
    """The record as a ``wandb.Table`` (rows beyond W&B's limits cut, with one warning per
    key; a mixed-type column logged with mixed types allowed)."""
    rows: Sequence[Sequence[Any]] = record.rows
    limit = int(wandb.Table.MAX_ARTIFACT_ROWS)
    shown = int(wandb.Table.MAX_ROWS)
    if len(rows) > shown:
        kept = min(len(rows), limit)
        _warn_once(
            "rows",
            record.name,
            "W&B: table %r at step %s has %d rows; W&B keeps the first %d in the run's media "
            "file (wandb.Table.MAX_ROWS) and %d in its run_table artifact "
            "(wandb.Table.MAX_ARTIFACT_ROWS)%s",
            record.name,
            record.step,
            len(rows),
            min(len(rows), shown),
            kept,
            f"; the last {len(rows) - kept} rows are not in W&B" if len(rows) > limit else "",
        )
        rows = rows[:limit]
    columns: list[str | int] = list(record.columns)
    data = [list(row) for row in rows]
    try:
        return wandb.Table(columns=columns, data=data)
    except TypeError as exc:  # W&B's type check: a column mixing, say, numbers and strings
        log.debug("W&B: table %r has mixed-type columns (%s); allowing them", record.name, exc)
        return wandb.Table(columns=columns, data=data, allow_mixed_types=True)


def merge_bins(
    counts: Sequence[int], edges: Sequence[float], limit: int
) -> tuple[list[int], list[float]]:
    """At most ``limit`` bins: groups of neighbouring bins added up (the edges between the
    members of a group dropped), the outer edges kept. Pure."""
    n = len(counts)
    if n <= limit:
        return list(counts), list(edges)
    size = math.ceil(n / limit)
    merged = [sum(counts[i : i + size]) for i in range(0, n, size)]
    new_edges = [edges[i] for i in range(0, n, size)] + [edges[n]]
    return merged, new_edges


def wandb_histogram(record: HistogramRecord) -> Any:
    """The record's bins as a ``wandb.Histogram`` (merged down to W&B's maximum length)."""
    counts, edges = list(record.counts), list(record.edges)
    if not counts:  # no finite value: one empty bin where the values would be
        low = record.min if math.isfinite(record.min) else 0.0
        high = record.max if math.isfinite(record.max) else low
        counts, edges = [0], [low, high]
    limit = int(wandb.Histogram.MAX_LENGTH)
    if len(counts) > limit:
        _warn_once(
            "bins",
            record.name,
            "W&B: histogram %r has %d bins; W&B takes at most %d (wandb.Histogram.MAX_LENGTH), "
            "so neighbouring bins are added up",
            record.name,
            len(counts),
            limit,
        )
        counts, edges = merge_bins(counts, edges, limit)
    return wandb.Histogram(np_histogram=(np.asarray(counts), np.asarray(edges, dtype=float)))


def text_html(text: str) -> str:
    """The text as a small HTML document that shows it verbatim (escaped, in ``<pre>``)."""
    return (
        '<!doctype html><meta charset="utf-8">'
        f'<pre style="{TEXT_STYLE}">{html.escape(text, quote=False)}</pre>'
    )


def text_of_html(document: str) -> str:
    """The text back from :func:`text_html` (for readers and tests)."""
    start = document.index(">", document.index("<pre")) + 1
    return html.unescape(document[start : document.rindex("</pre>")])


def wandb_artifact(record: ArtifactRecord) -> Any:
    """The record as a ``wandb.Artifact`` with its files added (copied into W&B's staging)."""
    name = artifact_name(record.name)
    typ = artifact_type(record.kind)
    if name != record.name or typ != record.kind:
        log.info(
            "W&B: artifact %r (kind %r) is logged as %r of type %r (W&B's name and type rules)",
            record.name,
            record.kind,
            name,
            typ,
        )
    metadata = {
        "tracking_core": {
            "name": record.name,
            "kind": record.kind,
            "role": record.role,
            "source": record.source,
            "size": record.size,
            "files": len(record.files),
            "snapshot": record.snapshot,
        }
    }
    artifact = wandb.Artifact(name, type=typ, metadata=metadata)
    if record.is_dir:
        artifact.add_dir(record.path)
    else:
        filename = record.files[0][0] if record.files else name
        artifact.add_file(record.path, name=filename)
    return artifact


# -- logging --------------------------------------------------------------------------------------
def log_media(
    backend: WandbBackend,
    shared: SharedRun,
    record: TableRecord | HistogramRecord | TextRecord,
    value: Any,
    key: str | None = None,
) -> None:
    """One history row holding ``value`` under ``key`` (default: the record's name), on the
    record's step axis."""
    key = record.name if key is None else key
    axis = axis_of(record)
    step = None if record.step is None else int(record.step)
    row = StepRow(axis, step, record.timestamp, {key: 0.0})
    data: dict[str, Any] = {key: value, TIMESTAMP_KEY: record.timestamp}
    if axis is not None and step is not None:
        data[axis] = step
    with shared.lock:
        backend.define_axes(shared.run, [row])
        shared.run.log(data)


def media_key(record: TableRecord | TextRecord, run_id: str) -> str:
    """The history key of a table or a text: its name, each part a safe file name (W&B makes
    the key a file path; see the module doc); a table's also short enough for the name W&B
    gives its ``run_table`` artifact (``run-<run id>-<key>``, at most 128 characters, to which
    W&B may add 7): a longer key is cut and ends with ``~`` and 8 hex digits of its SHA-256."""
    key = path_under(record.name, "W&B table or text key")
    room = ARTIFACT_NAME_MAX - len(f"run-{run_id}-") - 7
    if len(key) <= room or not isinstance(record, TableRecord):
        return key
    short = key[: max(1, room - 9)] + "~" + _short_hash(record.name)
    _warn_once(
        "key",
        record.name,
        "W&B: the table key %.120r is too long for W&B's table artifact name; logged as %r",
        record.name,
        short,
    )
    return short


def log_table(backend: WandbBackend, shared: SharedRun, record: TableRecord) -> None:
    log_media(backend, shared, record, wandb_table(record), media_key(record, shared.run.id))


def log_histogram(backend: WandbBackend, shared: SharedRun, record: HistogramRecord) -> None:
    log_media(backend, shared, record, wandb_histogram(record))


def log_text(backend: WandbBackend, shared: SharedRun, record: TextRecord) -> None:
    document = wandb.Html(text_html(record.text), inject=False, data_is_not_path=True)
    log_media(backend, shared, record, document, media_key(record, shared.run.id))


def log_artifact(shared: SharedRun, record: ArtifactRecord) -> None:
    artifact = wandb_artifact(record)
    with shared.lock:
        shared.run.log_artifact(artifact)
