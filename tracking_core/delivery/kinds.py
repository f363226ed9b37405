"""The rich record kinds on their way through the journal: tables, histograms, texts, artifacts.

Three steps, each in one place:

* :func:`hold_rows` / :func:`hold_values` run on the **training thread**: the cheapest copy that
  keeps what the caller logged from changing under us (a shallow copy of each row, a copy of
  an array), no conversion;
* :func:`table_entry`, :func:`histogram_entry`, :func:`text_entry` run on the **pump**: plain
  cells (redacted strings), bins and the exact summary of a distribution, as journal entries;
* :func:`record_of` runs in the **worker**: the entry as the record a backend's hook receives,
  and :func:`as_text` renders one for a backend that has no hook of its own for its kind.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from .. import settings
from ..config.secrets import NAMES
from ..records import ArtifactRecord, Cell, HistogramRecord, TableRecord, TextRecord
from .journal import encode_value

#: The journal's entry types of the rich kinds, and the hook that takes each.
HOOKS = {"table": "log_table", "hist": "log_histogram", "text": "log_text", "artifact": "log_artifact"}
#: What each kind is called in messages.
NOUNS = {"table": "tables", "hist": "histograms", "text": "texts", "artifact": "artifacts"}
PERCENTILES = (5, 25, 50, 75, 95)
DEFAULT_BINS = 64
MAX_BINS = 512

RichRecord = TableRecord | HistogramRecord | TextRecord | ArtifactRecord


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
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
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
        dicts: Iterable[Mapping[Any, Any]] = (
            dict(zip(columns, r, strict=False)) for r in rows.itertuples(index=False, name=None)
        )
    else:
        dicts = rows
        columns = []
        seen: set[str] = set()
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise TypeError(f"row {i} is a {type(row).__name__}, not a mapping of column to cell")
            for key in row:
                name = str(key)
                if name not in seen:
                    seen.add(name)
                    columns.append(name)
    redactor = _redactor(redact)
    out = []
    for row in dicts:
        by_name = {str(k): v for k, v in row.items()}
        out.append([cell(by_name.get(c), redactor) for c in columns])
    return [NAMES[c] for c in columns], out


def text_entry(text: Any, redact: bool) -> str:
    value = text if isinstance(text, str) else str(text)
    redactor = _redactor(redact)
    return redactor.redact_text(value) if redactor is not None else value


def _numbers(values: Any) -> list[float]:
    """The values as a flat list of floats (numpy when available: it is what holds them)."""
    detach = getattr(values, "detach", None)
    if detach is not None:
        values = detach().cpu().double().numpy()
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with every tracker we ship
        flat: list[float] = []
        for v in values:
            flat.append(float(v))
        return flat
    return np.asarray(values, dtype=float).ravel().tolist()


def histogram_entry(values: Any, bins: int) -> dict[str, Any]:
    """Bins over the finite values plus their exact summary (see :class:`HistogramRecord`)."""
    numbers = _numbers(values)
    finite = [v for v in numbers if math.isfinite(v)]
    non_finite = len(numbers) - len(finite)
    if not finite:
        raise ValueError(f"no finite values (of {len(numbers)})")
    bins = max(1, min(int(bins), MAX_BINS))
    lo, hi = min(finite), max(finite)
    try:
        import numpy as np

        arr = np.asarray(finite)
        counts_arr, edges_arr = np.histogram(arr, bins=bins, range=(lo, hi) if hi > lo else (lo - 0.5, hi + 0.5))
        counts = [int(c) for c in counts_arr]
        edges = [float(e) for e in edges_arr]
        pct = {f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES), strict=True)}
        total, squares = float(arr.sum()), float((arr * arr).sum())
    except ImportError:  # pragma: no cover
        counts, edges, pct, total, squares = _plain_histogram(finite, bins, lo, hi)
    return {
        "c": counts,
        "e": edges,
        "count": len(finite),
        "min": lo,
        "max": hi,
        "sum": encode_value(total),
        "sq": encode_value(squares),
        "pct": pct,
        "nf": non_finite,
    }


def _plain_histogram(finite: list[float], bins: int, lo: float, hi: float) -> tuple[list[int], list[float], dict[str, float], float, float]:
    if hi == lo:
        lo, hi = lo - 0.5, hi + 0.5
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


# -- the worker ------------------------------------------------------------------------------------
def record_of(entry: Mapping[str, Any], prefix: str, role: str | None, seq: int) -> RichRecord:
    """The record a backend's hook receives for a journaled rich entry."""
    kind = entry["t"]
    ts = float(entry["ts"])
    if kind == "table":
        return TableRecord(
            key=str(entry["k"]),
            columns=tuple(entry["cols"]),
            rows=tuple(tuple(r) for r in entry["rows"]),
            step=entry.get("st"),
            timestamp=ts,
            seq=seq,
            role=role,
            prefix=prefix,
            step_key=entry.get("sk"),
        )
    if kind == "hist":
        h = entry["h"]
        return HistogramRecord(
            key=str(entry["k"]),
            counts=tuple(h["c"]),
            edges=tuple(h["e"]),
            count=int(h["count"]),
            min=float(h["min"]),
            max=float(h["max"]),
            sum=float(h["sum"]),
            sum_squares=float(h["sq"]),
            percentiles=dict(h["pct"]),
            step=entry.get("st"),
            timestamp=ts,
            seq=seq,
            role=role,
            prefix=prefix,
            step_key=entry.get("sk"),
            non_finite=int(h.get("nf", 0)),
        )
    if kind == "text":
        return TextRecord(
            key=str(entry["k"]),
            text=str(entry["x"]),
            step=entry.get("st"),
            timestamp=ts,
            seq=seq,
            role=role,
            prefix=prefix,
            step_key=entry.get("sk"),
        )
    if kind == "artifact":
        return ArtifactRecord(
            key=str(entry["k"]),
            kind=str(entry.get("kind") or "artifact"),
            path=str(entry["path"]),
            source=str(entry["src"]),
            is_dir=bool(entry.get("dir")),
            size=int(entry.get("size") or 0),
            files=tuple((str(f), int(s)) for f, s in entry.get("files") or ()),
            timestamp=ts,
            seq=seq,
            role=role,
            prefix=prefix,
            snapshot=bool(entry.get("snap", True)),
        )
    raise ValueError(f"not a rich record kind: {kind!r}")


def as_text(record: RichRecord) -> TextRecord:
    """A table (as markdown) or an artifact (as a note) for a backend that only takes texts."""
    if isinstance(record, TextRecord):
        return record
    if isinstance(record, TableRecord):
        text = markdown_table(record.columns, record.rows)
        step, step_key = record.step, record.step_key
    elif isinstance(record, ArtifactRecord):
        text = artifact_note(record)
        step, step_key = None, None
    else:
        summary = ", ".join(f"{k} {v:.6g}" for k, v in record.summary().items())
        text = f"histogram of {record.count} values: {summary}"
        step, step_key = record.step, record.step_key
    return TextRecord(record.key, text, step, record.timestamp, record.seq, record.role, record.prefix, step_key)


def markdown_table(columns: Iterable[str], rows: Iterable[Iterable[Cell]]) -> str:
    """A GitHub-style markdown table (``|`` and newlines in cells escaped)."""

    def esc(value: Cell) -> str:
        text = "" if value is None else str(value)
        return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")

    cols = list(columns)
    lines = ["| " + " | ".join(esc(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


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
