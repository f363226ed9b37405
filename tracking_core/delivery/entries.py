"""The journal's entries as typed objects, and their compact form on disk.

Each line of a journal segment holds one entry as a JSON object with short keys, ``n`` first and
``t`` (the entry's tag) second::

    {"n": 7, "t": "row", "ts": 1.5, "m": {"loss": 0.25}, "st": 3, "sk": null}

That form is what the journal, the spill journal and records handed over in memory hold; it is
unchanged, so journals written before stay readable. In a process the core handles the typed
entries below, whose fields say what they hold. ``encode`` gives an entry's compact form, key
for key in the order it has always been written (the same bytes once dumped); :func:`decode`
reads one back with the defaults older writers relied on, and never raises: a line that is no
entry it knows is an :class:`Unknown` (a kind of a later version: nothing to deliver) or a
:class:`Damaged` entry (counted and set aside like a record the tracker refuses).

They are ``NamedTuple``\\ s, not dataclasses: the delivery worker decodes one per journal line,
and a named tuple is built in a fraction of a frozen dataclass's time. Rows are written by the
pump from :func:`row_line` directly, without building a :class:`Row` first, for the same reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, NamedTuple

from ..records import Cell, ConfigSection


def encode_value(value: float) -> float | str:
    """JSON has no NaN/inf: keep them as strings that decode back exactly."""
    return value if math.isfinite(value) else repr(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _line(entry: tuple[Any, ...], *keys: str) -> dict[str, Any]:
    """An entry's compact form: ``n``, its tag, then its other fields under ``keys``."""
    return {"n": entry[0], "t": TAGS[type(entry)], **dict(zip(keys, entry[1:], strict=True))}


def _keyed(cls: Any, obj: Mapping[str, Any], *fields: Any) -> Any:
    """An entry on a step axis read back: its number, time and key, ``fields``, its step."""
    return cls(obj["n"], float(obj["ts"]), str(obj["k"]), *fields, obj.get("st"), obj.get("sk"))


# -- the entries -------------------------------------------------------------------------------
def row_line(n: int, timestamp: float, values: dict[str, float | str], step: int | None, step_key: str | None) -> dict[str, Any]:
    """A row's compact form (the pump writes rows from this, without a :class:`Row`)."""
    return {"n": n, "t": "row", "ts": timestamp, "m": values, "st": step, "sk": step_key}


class Row(NamedTuple):
    """One ``log_metrics`` call: ``values`` by name, non-finite ones as their ``repr``."""

    n: int
    timestamp: float
    values: dict[str, float | str]
    step: int | None
    step_key: str | None

    def encode(self) -> dict[str, Any]:
        return row_line(*self)


class Table(NamedTuple):
    """A table: its columns and rows of plain cells (strings redacted)."""

    n: int
    timestamp: float
    key: str
    columns: list[str]
    rows: list[list[Cell]]
    step: int | None
    step_key: str | None

    def encode(self) -> dict[str, Any]:
        return _line(self, "ts", "k", "cols", "rows", "st", "sk")

    @classmethod
    def decode(cls, obj: Mapping[str, Any]) -> Table:
        return _keyed(cls, obj, list(obj["cols"]), list(obj["rows"]))


class Histogram(NamedTuple):
    """A distribution: bins over its finite values and their exact summary."""

    n: int
    timestamp: float
    key: str
    counts: list[int]
    edges: list[float]
    value_count: int
    min: float
    max: float
    sum: float
    sum_squares: float
    percentiles: dict[str, float]
    non_finite: int
    step: int | None
    step_key: str | None

    def encode(self) -> dict[str, Any]:
        bins = {
            "c": self.counts,
            "e": self.edges,
            "count": self.value_count,
            "min": self.min,
            "max": self.max,
            "sum": encode_value(self.sum),
            "sq": encode_value(self.sum_squares),
            "pct": self.percentiles,
            "nf": self.non_finite,
        }
        return {"n": self.n, "t": "hist", "ts": self.timestamp, "k": self.key, "h": bins, "st": self.step, "sk": self.step_key}

    @classmethod
    def decode(cls, obj: Mapping[str, Any]) -> Histogram:
        h = obj["h"]
        return _keyed(
            cls, obj, list(h["c"]), list(h["e"]), int(h["count"]), float(h["min"]), float(h["max"]),
            float(h["sum"]), float(h["sq"]), dict(h["pct"]), int(h.get("nf", 0)),
        )  # fmt: skip


class Text(NamedTuple):
    """A text (redacted)."""

    n: int
    timestamp: float
    key: str
    text: str
    step: int | None
    step_key: str | None

    def encode(self) -> dict[str, Any]:
        return _line(self, "ts", "k", "x", "st", "sk")

    @classmethod
    def decode(cls, obj: Mapping[str, Any]) -> Text:
        return _keyed(cls, obj, str(obj["x"]))


class Artifact(NamedTuple):
    """A file or directory as logged: ``path`` is its snapshot (``snapshot``) or, where none
    could be taken, the ``source`` it was logged from; ``files`` are (relative path, size)."""

    n: int
    timestamp: float
    key: str
    artifact_kind: str
    source: str
    is_dir: bool
    size: int
    files: tuple[tuple[str, int], ...]
    path: str
    snapshot: bool

    def encode(self) -> dict[str, Any]:
        line = _line(self, "ts", "k", "kind", "src", "dir", "size", "files", "path", "snap")
        line["files"] = [[rel, size] for rel, size in self.files]
        return line

    @classmethod
    def decode(cls, obj: Mapping[str, Any]) -> Artifact:
        return cls(
            obj["n"], float(obj["ts"]), str(obj["k"]), str(obj.get("kind") or "artifact"), str(obj["src"]), bool(obj.get("dir")),
            int(obj.get("size") or 0), tuple((str(f), int(s)) for f, s in obj.get("files") or ()), str(obj["path"]), bool(obj.get("snap", True)),
        )  # fmt: skip


class Config(NamedTuple):
    """A config section, converted and redacted (the journal holds no secret)."""

    n: int
    section: ConfigSection

    def encode(self) -> dict[str, Any]:
        return {"n": self.n, "t": "config", "section": asdict(self.section)}

    @classmethod
    def decode(cls, obj: Mapping[str, Any]) -> Config:
        data = obj["section"]
        section = ConfigSection(
            role=data.get("role"),
            namespace=data["namespace"],
            prefix=data.get("prefix", ""),
            values=data.get("values") or {},
            params=data.get("params") or {},
            report=data.get("report") or {},
        )
        return cls(obj["n"], section)


class End(NamedTuple):
    """The run's end, the journal's last entry: the status the writer meant, when it ended, and
    ``by`` (``follower``) where the writer died without it and its follower wrote it."""

    n: int
    status: str | None
    timestamp: float | None
    by: str | None = None

    def encode(self) -> dict[str, Any]:
        obj = {"n": self.n, "t": "end", "status": self.status, "ts": self.timestamp}
        if self.by is not None:
            obj["by"] = self.by
        return obj

    @classmethod
    def decode(cls, obj: Mapping[str, Any]) -> End:
        ts = obj.get("ts")
        return cls(obj["n"], _text(obj.get("status")), None if ts is None else float(ts), _text(obj.get("by")))


class Unknown(NamedTuple):
    """An entry of a kind this version does not know (a later one's): nothing to deliver."""

    n: int
    tag: str
    line: Mapping[str, Any]

    def encode(self) -> dict[str, Any]:
        return dict(self.line)


class Damaged(NamedTuple):
    """An entry of a known kind that cannot be read back (a field missing or of the wrong type):
    delivered as a record every tracker refuses (set aside and counted)."""

    n: int
    tag: str
    line: Mapping[str, Any]
    error: Exception

    def encode(self) -> dict[str, Any]:
        return dict(self.line)


Entry = Row | Table | Histogram | Text | Artifact | Config | End | Unknown | Damaged

#: Each entry type by the tag it has on disk (``t``), and back.
TAGS: dict[type, str] = {Row: "row", Table: "table", Histogram: "hist", Text: "text", Artifact: "artifact", Config: "config", End: "end"}
_NEW = tuple.__new__


def _row(obj: Mapping[str, Any]) -> Row:
    """A row read back, built without a call to its class: the worker decodes one row per
    journal line."""
    return _NEW(Row, (obj["n"], float(obj["ts"]), obj["m"], obj.get("st"), obj.get("sk")))


def _unknown(obj: Mapping[str, Any]) -> Unknown:
    return Unknown(obj["n"], obj["t"], obj)


_DECODERS: dict[str, Any] = {tag: _row if cls is Row else cls.decode for cls, tag in TAGS.items()}  # type: ignore[attr-defined]


def decode(obj: Mapping[str, Any]) -> Entry:
    """The typed entry of a journal line (as :func:`~tracking_core.delivery.journal.parse_line`
    gives it: ``n`` an int, ``t`` a str). Never raises."""
    try:
        return _DECODERS.get(obj["t"], _unknown)(obj)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return Damaged(obj["n"], obj["t"], obj, exc)


def is_end(obj: Mapping[str, Any]) -> bool:
    """Whether a journal line is the run's end (without decoding it)."""
    return obj.get("t") == TAGS[End]
