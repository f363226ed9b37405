"""The record kinds, in one registry: everything the core does with each kind of record.

A :class:`Kind` per kind -- :data:`METRIC`, :data:`TABLE`, :data:`HISTOGRAM`, :data:`TEXT`,
:data:`ARTIFACT`, :data:`CONFIG`, :data:`END` -- says, in one place:

* its **entry** in the journal (:mod:`tracking_core.delivery.entries`: the typed entry, its
  compact encoding on disk and its decoding);
* its **conversion on the pump**: ``convert`` turns what the training thread held (rows of a
  table, the values of a histogram, a text) into the entry's fields -- plain cells, bins and the
  exact summary of a distribution, secret-shaped strings redacted (:func:`redacts_text`); or
  ``make`` builds the entry of what needs no conversion (a config section, an artifact once
  snapshotted, the end); metric rows take the pump's own per-value path (``batched``);
* the **hook** that takes it and the records that hook receives (``records``, ``arguments``);
* its **fallbacks** for a backend without that hook (a table or an artifact as a text, a
  histogram as summary series, else set aside and counted): ``optional`` kinds only;
* how it **counts** in the finish summary and ``tracking-core sync`` (``values``), what it is
  called in messages (``name``, ``noun``, ``method``), and how delivery treats it: rows join in
  batches (``batched``), a refused config section is owed, not rejected (``owed``), the end
  closes the run (``closes``).

The pump, the delivery worker and sync ask the registry (:func:`of`, :func:`count`) instead of
comparing kind names, so a new kind is a :class:`Kind` here (with its entry, record type and hook)
and each tracker's handler for it.

Where each step runs:

* :func:`hold_rows` / :func:`hold_values` run on the **training thread**: the cheapest copy that
  keeps what the caller logged from changing under us (a shallow copy of each row, a copy of
  an array), no conversion;
* ``convert`` / ``make`` run on the **pump**;
* ``records`` runs in the **worker**, and :func:`as_text` renders a record for a backend that
  has no hook of its own for its kind.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import settings
from ..config.secrets import NAMES
from ..records import (
    ArtifactRecord,
    Cell,
    ConfigSection,
    HistogramRecord,
    MetricRecord,
    TableRecord,
    TextRecord,
)
from . import entries, snapshot
from .entries import (
    Artifact,
    Config,
    Damaged,
    End,
    Entry,
    Histogram,
    Row,
    Table,
    Text,
    Unknown,
)

__all__ = ["ARTIFACT", "CONFIG", "END", "HISTOGRAM", "KINDS", "METRIC", "NAMES", "TABLE", "TEXT", "Fallback", "Kind", "count", "of"]

PERCENTILES = (5, 25, 50, 75, 95)
DEFAULT_BINS = 64
MAX_BINS = 512
#: Records of one journal entry get consecutive ``seq`` numbers inside a span of this size
#: (the entry's number times the span, plus the value's place in its row).
ROW_SPAN = 1 << 20

RichRecord = TableRecord | HistogramRecord | TextRecord | ArtifactRecord


# -- the registry ------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Fallback:
    """How a kind reaches a backend without its hook: through ``hook``, with the keyword
    arguments ``arguments`` makes of the record; ``how`` completes the warning said once."""

    hook: str
    how: str
    arguments: Callable[[Any], dict[str, Any]]


def _none(*_: Any) -> Any:
    return None


@dataclass(frozen=True, eq=False)
class Kind:
    """One record kind (see the module doc)."""

    #: what one is called in messages ("histogram"), and many ("histograms")
    name: str
    noun: str
    #: its journal entry (:mod:`.entries`)
    entry: type
    #: the ``Run`` method that logs it (messages say it)
    method: str
    #: the backend hook that takes it (None: nothing to deliver)
    hook: str | None
    #: entry, prefix, role -> the records its hook receives (raises for a damaged entry)
    records: Callable[[Any, str, str | None], list[Any]]
    #: those records as the hook's keyword arguments (``run`` is added)
    arguments: Callable[[list[Any]], dict[str, Any]]
    #: how many values an entry counts for (summary, sync)
    values: Callable[[Any], int]
    #: pump: (held value, redact, *extra) -> the entry's own fields, between its key and its step
    convert: Callable[..., tuple[Any, ...]] | None = None
    #: pump: (record number, payload) -> the entry, for a kind that needs no conversion
    make: Callable[[int, Any], Any] = _none
    #: a backend may lack its hook: the fallbacks are tried in order, else it is set aside
    optional: bool = False
    fallbacks: tuple[Fallback, ...] = ()
    #: consecutive entries are delivered together, up to a backend's ``max_batch`` values
    batched: bool = False
    #: refused by a backend that takes other records: owed (kept for sync), not rejected
    owed: bool = False
    #: the run's end: nothing follows it, and a worker closes the run with it
    closes: bool = False

    @property
    def tag(self) -> str:
        """Its entries' tag on disk (``t``)."""
        return entries.TAGS[self.entry]


def _one(_: Any) -> int:
    return 1


def _zero(_: Any) -> int:
    return 0


#: The slot setters of MetricRecord's fields, in their order (new_metric's parameters).
_METRIC_SETTERS: tuple[Callable[[Any, Any], None], ...] = tuple(getattr(MetricRecord, f.name).__set__ for f in dataclasses.fields(MetricRecord))


def new_metric(
    key: str,
    value: float,
    step: int | None,
    timestamp: float,
    seq: int,
    role: str | None,
    prefix: str,
    step_key: str | None,
    _new: Callable[[type], Any] = object.__new__,
    _set: tuple[Callable[[Any, Any], None], ...] = _METRIC_SETTERS,
) -> MetricRecord:
    """``MetricRecord(key, value, step, timestamp, seq, role, prefix, step_key)``, the same
    frozen record, set through its slots in about half the time of its dataclass ``__init__``:
    the worker builds one per value it delivers."""
    record = _new(MetricRecord)
    k, v, s, t, q, r, p, a = _set
    k(record, key)
    v(record, value)
    s(record, step)
    t(record, timestamp)
    q(record, seq)
    r(record, role)
    p(record, prefix)
    a(record, step_key)
    return record


def metric_records(row: Row, prefix: str, role: str | None) -> list[MetricRecord]:
    """The metric records of one journaled row."""
    n, ts, values, step, step_key = row
    base = n * ROW_SPAN
    new = new_metric
    return [new(key, float(value), step, ts, base + i, role, prefix, step_key) for i, (key, value) in enumerate(values.items())]


def summary_records(h: HistogramRecord) -> list[MetricRecord]:
    """A histogram as the summary series of a backend without histograms."""
    return [
        MetricRecord(f"{h.key}/{suffix}", value, h.step, h.timestamp, h.seq + i, h.role, h.prefix, h.step_key)
        for i, (suffix, value) in enumerate(h.summary().items())
    ]


def _table_record(e: Table, prefix: str, role: str | None) -> list[TableRecord]:
    rows = tuple(tuple(r) for r in e.rows)
    return [TableRecord(e.key, tuple(e.columns), rows, e.step, e.timestamp, e.n * ROW_SPAN, role, prefix, e.step_key)]


def _histogram_record(e: Histogram, prefix: str, role: str | None) -> list[HistogramRecord]:
    return [
        HistogramRecord(
            key=e.key,
            counts=tuple(e.counts),
            edges=tuple(e.edges),
            count=e.value_count,
            min=e.min,
            max=e.max,
            sum=e.sum,
            sum_squares=e.sum_squares,
            percentiles=dict(e.percentiles),
            step=e.step,
            timestamp=e.timestamp,
            seq=e.n * ROW_SPAN,
            role=role,
            prefix=prefix,
            step_key=e.step_key,
            non_finite=e.non_finite,
        )
    ]


def _text_record(e: Text, prefix: str, role: str | None) -> list[TextRecord]:
    return [TextRecord(e.key, e.text, e.step, e.timestamp, e.n * ROW_SPAN, role, prefix, e.step_key)]


def _artifact_record(e: Artifact, prefix: str, role: str | None) -> list[ArtifactRecord]:
    record = ArtifactRecord(
        key=e.key,
        kind=e.artifact_kind,
        path=e.path,
        source=e.source,
        is_dir=e.is_dir,
        size=e.size,
        files=e.files,
        timestamp=e.timestamp,
        seq=e.n * ROW_SPAN,
        role=role,
        prefix=prefix,
        snapshot=e.snapshot,
    )
    return [record]


def _as(keyword: str) -> Callable[[list[Any]], dict[str, Any]]:
    def arguments(records: list[Any]) -> dict[str, Any]:
        return {keyword: records[0]}

    return arguments


def _config_arguments(records: list[ConfigSection]) -> dict[str, Any]:
    return {"config": records[0], "role": records[0].role}


def _damaged(e: Damaged, prefix: str, role: str | None) -> list[Any]:
    raise e.error


_AS_TEXT = Fallback("log_text", "as text through log_text", lambda record: {"text": as_text(record)})

METRIC = Kind(
    name="metric",
    noun="metrics",
    entry=Row,
    method="log_metrics",
    hook="log_metrics",
    records=metric_records,
    arguments=lambda records: {"records": records},
    values=lambda row: len(row.values),
    batched=True,
)
TABLE = Kind(
    name="table",
    noun="tables",
    entry=Table,
    method="log_table",
    hook="log_table",
    records=_table_record,
    arguments=_as("table"),
    values=_one,
    convert=lambda rows, redact: table_entry(rows, redact),
    optional=True,
    fallbacks=(_AS_TEXT,),
)
HISTOGRAM = Kind(
    name="histogram",
    noun="histograms",
    entry=Histogram,
    method="log_histogram",
    hook="log_histogram",
    records=_histogram_record,
    arguments=_as("histogram"),
    values=_one,
    convert=lambda values, redact, bins: histogram_entry(values, bins),
    optional=True,
    fallbacks=(
        Fallback(
            "log_metrics",
            "as summary series through log_metrics (<key>/mean, /min, /max, /p50, ...)",
            lambda record: {"records": summary_records(record)},
        ),
        _AS_TEXT,
    ),
)
TEXT = Kind(
    name="text",
    noun="texts",
    entry=Text,
    method="log_text",
    hook="log_text",
    records=_text_record,
    arguments=_as("text"),
    values=_one,
    convert=lambda text, redact: (cell(text if isinstance(text, str) else str(text), _redactor(redact)),),
    optional=True,
)
ARTIFACT = Kind(
    name="artifact",
    noun="artifacts",
    entry=Artifact,
    method="log_artifact",
    hook="log_artifact",
    records=_artifact_record,
    arguments=_as("artifact"),
    values=_one,
    make=lambda n, entry: snapshot.numbered(entry, n),
    optional=True,
    fallbacks=(_AS_TEXT,),
)
CONFIG = Kind(
    name="config",
    noun="config sections",
    entry=Config,
    method="log_config",
    hook="log_config",
    records=lambda e, prefix, role: [e.section],
    arguments=_config_arguments,
    values=_zero,
    make=lambda n, section: Config(n, section),
    owed=True,
)
END = Kind(
    name="end",
    noun="ends",
    entry=End,
    method="finish",
    hook="close_run",
    records=lambda e, prefix, role: [],
    arguments=lambda records: {},
    values=_zero,
    make=lambda n, status: End(n, str(status), time.time()),
    closes=True,
)
#: An entry of a later version's kind: nothing to deliver, nothing counted.
UNKNOWN = Kind("unknown", "unknown records", Unknown, "", None, lambda e, prefix, role: [], lambda records: {}, _zero)
#: An entry that cannot be read back: refused by every tracker (set aside, counted as one).
DAMAGED = Kind("damaged", "damaged records", Damaged, "", None, _damaged, lambda records: {}, _one)

#: Every kind a caller can log, in the order the docs list them.
KINDS: tuple[Kind, ...] = (METRIC, TABLE, HISTOGRAM, TEXT, ARTIFACT, CONFIG, END)
_BY_ENTRY: dict[type, Kind] = {kind.entry: kind for kind in (*KINDS, UNKNOWN, DAMAGED)}


def of(entry: Entry) -> Kind:
    """The kind of a journal entry."""
    return _BY_ENTRY[type(entry)]


def count(batch: Iterable[Entry]) -> int:
    """What journal entries count for, in the finish summary and in ``tracking-core sync``
    alike: each metric value, each rich record (config sections and the end are not values)."""
    by_entry = _BY_ENTRY
    return sum(by_entry[type(e)].values(e) for e in batch)


def key_of(entry: Entry) -> str:
    """The key an entry's records are reported under when no record can be made of it."""
    if isinstance(entry, (Unknown, Damaged)):
        return str(entry.line.get("k"))
    return str(getattr(entry, "key", None))


# -- the training thread ---------------------------------------------------------------------------
def hold_rows(rows: Any) -> Any:
    """A snapshot of a table's rows that the caller can no longer change: each mapping copied
    (cells are kept by reference: strings and numbers do not change), a DataFrame copied."""
    if _is_dataframe(rows):
        return rows.copy()
    if isinstance(rows, Mapping):
        raise TypeError("rows must be a sequence of mappings (one per row), not one mapping")
    try:
        return list(map(dict.copy, rows))  # the common case, rows of dicts, at C speed
    except TypeError:
        return [dict(row) if isinstance(row, Mapping) else row for row in rows]


def hold_values(values: Any) -> Any:
    """A snapshot of a histogram's values: an array or tensor copied (a tensor stays on its
    device: moving it is the pump's job), any other iterable made a tuple."""
    detach = getattr(values, "detach", None)
    if detach is not None:  # a torch tensor
        return detach().clone()
    copy = getattr(values, "copy", None)
    if copy is not None and hasattr(values, "dtype"):  # a numpy array
        return copy()
    return tuple(values)


def _is_dataframe(value: Any) -> bool:
    return hasattr(value, "to_dict") and hasattr(value, "columns") and hasattr(value, "iloc")


# -- the pump --------------------------------------------------------------------------------------
def redacts_text() -> bool:
    """Whether table cells and texts pass the value-shape secret redaction (default yes)."""
    return (settings.get(settings.REDACT_TEXT) or "1").strip().lower() not in ("0", "false", "no", "off")


def _redactor(enabled: bool) -> Any:
    if not enabled:
        return None
    from ..config.secrets import default_redactor

    return default_redactor()


def cell(value: Any, redactor: Any) -> Cell:
    """A table cell as plain JSON: str (redacted), int, finite float, bool or None; numpy and
    torch scalars by value; a non-finite float as its ``repr`` (``"nan"``); anything else as
    its ``str``."""
    if value is None or isinstance(value, int):  # bool is an int
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if not isinstance(value, str):
        item = getattr(value, "item", None)
        if item is not None:
            try:
                return cell(item(), redactor)
            except Exception:  # noqa: BLE001 - not a scalar (an array): its str below
                pass
        try:
            value = str(value)
        except Exception as exc:  # noqa: BLE001 - an object whose str raises
            value = f"<{type(value).__name__}: str() raised {type(exc).__name__}>"
    return redactor.redact_text(value) if redactor is not None else value


def table_entry(rows: Any, redact: bool) -> tuple[list[str], list[list[Cell]]]:
    """Columns (in the order they first appear; secret shapes in their names replaced, as in
    every record's name, whatever ``redact`` says of the cells) and rows of plain cells."""
    if _is_dataframe(rows):
        columns = [str(c) for c in rows.columns]
        rows = [dict(zip(columns, r, strict=False)) for r in rows.itertuples(index=False, name=None)]
    else:
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise TypeError(f"row {i} is a {type(row).__name__}, not a mapping of column to cell")
        columns = list(dict.fromkeys(str(key) for row in rows for key in row))
    redactor = _redactor(redact)
    out = []
    for row in rows:
        by_name = {str(k): v for k, v in row.items()}
        out.append([cell(by_name.get(c), redactor) for c in columns])
    return [NAMES[c] for c in columns], out


def _numbers(values: Any) -> list[float]:
    """The values as a flat list of floats (numpy when available: it is what holds them)."""
    detach = getattr(values, "detach", None)
    if detach is not None:
        values = detach().cpu().double().numpy()
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with every tracker we ship
        return [float(v) for v in values]
    return np.asarray(values, dtype=float).ravel().tolist()


def histogram_entry(values: Any, bins: int) -> tuple[Any, ...]:
    """Bins over the finite values plus their exact summary (see :class:`HistogramRecord`): the
    fields of a :class:`~tracking_core.delivery.entries.Histogram` between its key and its step."""
    numbers = _numbers(values)
    finite = [v for v in numbers if math.isfinite(v)]
    non_finite = len(numbers) - len(finite)
    if not finite:
        raise ValueError(f"no finite values (of {len(numbers)})")
    bins = max(1, min(int(bins), MAX_BINS))
    lo, hi = min(finite), max(finite)
    span = (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)
    try:
        import numpy as np

        arr = np.asarray(finite)
        counts_arr, edges_arr = np.histogram(arr, bins=bins, range=span)
        counts, edges = counts_arr.tolist(), edges_arr.tolist()
        pct = {f"p{p}": v for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES).tolist(), strict=True)}
        total, squares = float(arr.sum()), float((arr * arr).sum())
    except ImportError:  # pragma: no cover
        counts, edges, pct, total, squares = _plain_histogram(finite, bins, *span)
    return counts, edges, len(finite), lo, hi, total, squares, pct, non_finite


def _plain_histogram(finite: list[float], bins: int, lo: float, hi: float) -> tuple[list[int], list[float], dict[str, float], float, float]:
    width = (hi - lo) / bins
    edges = [lo + i * width for i in range(bins)] + [hi]
    counts = [0] * bins
    for v in finite:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    ordered = sorted(finite)
    pct = {}
    for p in PERCENTILES:
        pos = (len(ordered) - 1) * p / 100
        below = int(pos)
        above = min(below + 1, len(ordered) - 1)
        pct[f"p{p}"] = ordered[below] + (ordered[above] - ordered[below]) * (pos - below)
    return counts, edges, pct, sum(finite), sum(v * v for v in finite)


# -- the worker: fallbacks ----------------------------------------------------------------------
def as_text(record: RichRecord) -> TextRecord:
    """A table (as markdown) or an artifact (as a note) for a backend that only takes texts."""
    if isinstance(record, TextRecord):
        return record
    if isinstance(record, TableRecord):
        text = markdown_table(record.columns, record.rows)
    elif isinstance(record, ArtifactRecord):
        text = artifact_note(record)
    else:
        summary = ", ".join(f"{k} {v:.6g}" for k, v in record.summary().items())
        text = f"histogram of {record.count} values: {summary}"
    step, step_key = getattr(record, "step", None), getattr(record, "step_key", None)  # an artifact has none
    return TextRecord(record.key, text, step, record.timestamp, record.seq, record.role, record.prefix, step_key)


def markdown_table(columns: Iterable[str], rows: Iterable[Iterable[Cell]]) -> str:
    """A GitHub-style markdown table (``|`` and newlines in cells escaped)."""

    def esc(value: Cell) -> str:
        text = "" if value is None else str(value)
        return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")

    def line(cells: Iterable[Cell]) -> str:
        return "| " + " | ".join(map(esc, cells)) + " |"

    cols = list(columns)
    return "\n".join([line(cols), "|" + "---|" * len(cols), *map(line, rows)])


def artifact_note(record: ArtifactRecord) -> str:
    """What a tracker with no artifact store keeps of an artifact: name, kind, size, SHA-256
    and where the file was logged from (the snapshot is removed once every backend has it)."""
    try:
        digest = record.sha256()
    except OSError as exc:
        digest = f"unavailable ({exc.strerror or exc})"
    what = "directory" if record.is_dir else "file"
    return (
        f"artifact {record.name} ({record.kind}): {what} of {record.size} bytes"
        + (f" in {len(record.files)} files" if record.is_dir else "")
        + f", sha256 {digest}, logged from {record.source}"
    )
