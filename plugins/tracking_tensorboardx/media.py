"""The rich kinds as TensorBoard summaries: histograms, tables and texts as text, artifacts as a
note. Each goes to the role's run (subdirectory) under its unprefixed key, as metrics do.

* **Histograms**: TensorBoard's histogram summary from the record's bins and exact summary
  (tensorboardX's ``histogram_raw``: ``bucket_limit[i]`` is bin ``i``'s right edge, the first
  bin's left edge is ``min``). TensorBoard's reader drops empty bins at both ends.
* **Tables**: a markdown table (the text plugin renders markdown, tables included). Cells are
  shown as written: HTML is escaped (model output such as ``<think>`` would otherwise be
  removed by TensorBoard's sanitiser), markdown characters are backslash-escaped, line breaks
  become ``<br>``; ``None`` is an empty cell.
* **Texts**: the text as written, in a fenced code block (longer than any fence inside it), so
  whitespace, markup and model output show verbatim.
* **Artifacts**: TensorBoard has no file store, so an artifact becomes a note under
  ``artifacts/<key>``: name, kind, size, file count, SHA-256 (of the file, or of the
  directory's listing, :meth:`~tracking_core.records.ArtifactRecord.sha256`) and where it was
  logged from. The other trackers of the run hold the bytes.

**Limits.** TensorBoard renders text as markdown on the server for every view, and its event
files are read whole by its reader: a text event is kept under :data:`MAX_TEXT_CHARS`
characters. A longer text is cut, and a table stops at the row that would pass it, with a line
saying how much is left out and one warning per key (the other trackers of the run have it
whole). The TensorBoard server also keeps only 10 texts per tag by default (a reservoir
sample); ``tensorboard --samples_per_plugin text=0`` shows every step.

A record without a step gets one past the last step this process wrote for that tag, as a
metric does.
"""

from __future__ import annotations

import html
import logging
import re
from typing import TYPE_CHECKING

from tensorboardX.proto.event_pb2 import Event
from tensorboardX.summary import histogram_raw
from tensorboardX.summary import text as text_summary

from tracking_core.plugin_api import ArtifactRecord, Cell, HistogramRecord, TableRecord, TextRecord

if TYPE_CHECKING:
    from .backend import TensorBoardBackend

log = logging.getLogger("tracking_core.backends.tensorboard")

#: The most characters of one text event (a table or a text).
MAX_TEXT_CHARS = 1_000_000
#: The tag prefix of artifact notes.
ARTIFACT_TAG = "artifacts/"
#: What python-markdown unescapes after a backslash, plus ``|`` (table cells).
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|])")
_FENCE_RUN = re.compile(r"`{3,}")
#: ``(kind, name)`` of the records already warned about in this process: one warning per key.
_warned: set[tuple[str, str]] = set()


def _warn_once(kind: str, name: str, message: str, *args: object) -> None:
    if (kind, name) in _warned:
        log.debug(message, *args)
        return
    _warned.add((kind, name))
    log.warning(message + " (said once per key)", *args)


# -- pure shaping --------------------------------------------------------------------------------
def cell_markdown(cell: Cell) -> str:
    """One cell as markdown that shows its text as written (see the module doc)."""
    if cell is None:
        return ""
    text = str(cell)
    text = html.escape(text, quote=False)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return text.replace("\r\n", "\n").replace("\n", "<br>")


def table_markdown(record: TableRecord, limit: int = MAX_TEXT_CHARS) -> tuple[str, int]:
    """The table as markdown, and how many rows did not fit in ``limit`` characters."""
    if not record.columns:
        return f"*(a table with no columns and {len(record.rows)} rows)*", 0
    lines = [
        "| " + " | ".join(cell_markdown(c) for c in record.columns) + " |",
        "|" + "---|" * len(record.columns),
    ]
    used = sum(len(line) + 1 for line in lines)
    left_out = 0
    for i, row in enumerate(record.rows):
        line = "| " + " | ".join(cell_markdown(c) for c in row) + " |"
        if used + len(line) + 1 > limit:
            left_out = len(record.rows) - i
            break
        lines.append(line)
        used += len(line) + 1
    if left_out:
        lines.append("")
        lines.append(
            f"*{left_out} of {len(record.rows)} rows left out: TensorBoard text is kept under "
            f"{limit} characters*"
        )
    return "\n".join(lines), left_out


def text_markdown(text: str, limit: int = MAX_TEXT_CHARS) -> tuple[str, int]:
    """The text in a fenced code block (shown verbatim), and how many characters were cut."""
    cut = max(0, len(text) - limit)
    body = text[:limit] if cut else text
    longest = max((len(m) for m in _FENCE_RUN.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    out = f"{fence}\n{body}\n{fence}"
    if cut:
        out += f"\n\n*{cut} of {len(text)} characters left out: TensorBoard text is kept under {limit}*"
    return out, cut


def text_of_markdown(markdown: str) -> str:
    """The text back from :func:`text_markdown` (for readers and tests)."""
    first, _, rest = markdown.partition("\n")
    return rest[: rest.rindex("\n" + first)]


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit} ({n} B)"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def artifact_note(record: ArtifactRecord, sha256: str) -> str:
    """The markdown note that stands for an artifact in TensorBoard."""
    rows = [
        ("name", record.name),
        ("kind", record.kind),
        ("size", _size(record.size)),
        ("files", str(len(record.files))),
        ("sha256", sha256),
        ("logged from", record.source),
    ]
    if not record.snapshot:
        rows.append(("note", "no snapshot could be taken: hashed as the file was when delivered"))
    lines = ["| | |", "|---|---|"]
    lines += [f"| {cell_markdown(k)} | {cell_markdown(v)} |" for k, v in rows]
    if record.is_dir:
        shown = sorted(record.files)[:50]
        lines += ["", "files:", ""]
        lines += [f"* {cell_markdown(rel)} ({_size(size)})" for rel, size in shown]
        if len(record.files) > len(shown):
            lines.append(f"* … {len(record.files) - len(shown)} more")
    return "\n".join(lines)


# -- writing --------------------------------------------------------------------------------------
def _step(backend: TensorBoardBackend, subdir: str, tag: str, step: int | None) -> int:
    """The record's step, or one past the last this process wrote for the tag (0 first)."""
    prev = backend._last_step.get((subdir, tag))
    if step is not None:
        return int(step)
    return 0 if prev is None else prev + 1


def _write(backend: TensorBoardBackend, subdir: str, tag: str, step: int, event: Event) -> None:
    """Write one event; once it is on disk, remember its step as the tag's last."""
    backend._writer(subdir).write([event])
    prev = backend._last_step.get((subdir, tag))
    backend._last_step[(subdir, tag)] = step if prev is None else max(prev, step)


def _write_text(
    backend: TensorBoardBackend,
    role: str | None,
    tag: str,
    markdown: str,
    step: int | None,
    wall_time: float,
) -> None:
    from .backend import run_subdir

    subdir = run_subdir(role)
    summary = text_summary(tag, markdown)
    summary.value[0].tag = tag  # tensorboardX appends "/text_summary"; keep the tag as named
    # A scalar string, as TensorFlow's own text summary writes: TensorBoard renders it as the
    # markdown it is, where tensorboardX's one-element vector is wrapped in a one-cell table.
    summary.value[0].tensor.tensor_shape.ClearField("dim")
    at = _step(backend, subdir, tag, step)
    _write(backend, subdir, tag, at, Event(wall_time=wall_time, step=at, summary=summary))


def log_histogram(backend: TensorBoardBackend, record: HistogramRecord) -> None:
    from .backend import run_subdir

    subdir = run_subdir(record.role)
    summary = histogram_raw(
        record.key,
        min=record.min,
        max=record.max,
        num=record.count,
        sum=record.sum,
        sum_squares=record.sum_squares,
        bucket_limits=list(record.edges[1:]),
        bucket_counts=list(record.counts),
    )
    at = _step(backend, subdir, record.key, record.step)
    _write(
        backend, subdir, record.key, at, Event(wall_time=record.timestamp, step=at, summary=summary)
    )


def log_table(backend: TensorBoardBackend, record: TableRecord) -> None:
    markdown, left_out = table_markdown(record)
    if left_out:
        _warn_once(
            "table",
            record.name,
            "TensorBoard: table %r at step %s: %d of %d rows left out (TensorBoard text is kept "
            "under %d characters); the run's other trackers have them",
            record.name,
            record.step,
            left_out,
            len(record.rows),
            MAX_TEXT_CHARS,
        )
    _write_text(backend, record.role, record.key, markdown, record.step, record.timestamp)


def log_text(backend: TensorBoardBackend, record: TextRecord) -> None:
    markdown, cut = text_markdown(record.text)
    if cut:
        _warn_once(
            "text",
            record.name,
            "TensorBoard: text %r at step %s: %d of %d characters left out (TensorBoard text is "
            "kept under %d characters); the run's other trackers have it whole",
            record.name,
            record.step,
            cut,
            len(record.text),
            MAX_TEXT_CHARS,
        )
    _write_text(backend, record.role, record.key, markdown, record.step, record.timestamp)


def log_artifact(backend: TensorBoardBackend, record: ArtifactRecord) -> None:
    note = artifact_note(record, record.sha256())
    _write_text(backend, record.role, ARTIFACT_TAG + record.key, note, None, record.timestamp)
