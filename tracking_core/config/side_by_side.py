"""Three or more configs side by side: ``tracking-core diff RUN --roles actor critic launch``.

Two configs read best as a change (:mod:`.diff`: old, new, the kind of change). With more, the
question is "which keys are not the same everywhere, and what is each one's value in each
namespace?": one row per such key, one column per namespace, ``(absent)`` where a namespace has
no such key. Nested mappings are compared key by key (paths like ``a.b``), lists whole.

Sameness is value *and* JSON type, as in :mod:`.diff` (``0.0`` and ``0`` are not the same), and
the same two kinds of row are listed apart, below the real differences and out of the headline
count: per-launch values (:func:`~.diff.is_volatile`: ports, run and job ids, pids, hosts,
timestamps) and the same number in another type in every namespace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .convert import child_path, to_plain
from .diff import is_volatile, set_apart

__all__ = ["ABSENT", "SideBySide", "compare_configs", "flatten"]


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


#: The value of a key a namespace does not have.
ABSENT: Any = _Absent()


def flatten(values: Mapping[str, Any], path: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}, "c": []}`` -> ``{"a.b": 1, "c": []}``: nested mappings become paths
    (an empty mapping stays a value), anything else is a value."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        where = child_path(path, str(key))
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, where))
        else:
            out[where] = value
    return out


def _text(value: Any) -> str:
    """Compact JSON: equal texts are equal values of the same JSON type (``0.0`` is not ``0``)."""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        return repr(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


@dataclass(frozen=True)
class SideBySide:
    """The keys whose value is not the same in every namespace of ``names``, each with its value
    per namespace (in the order of ``names``; :data:`ABSENT` where a namespace lacks it)."""

    names: tuple[str, ...]
    rows: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.rows)

    @property
    def volatile(self) -> list[str]:
        """Keys naming per-launch values (ports, ids, pids, hosts, timestamps)."""
        return [key for key in self.rows if is_volatile(key)]

    @property
    def numeric_type_only(self) -> list[str]:
        """Keys present everywhere with one number in more than one type (``0.0``, ``0``)."""
        out = []
        for key, values in self.rows.items():
            if is_volatile(key) or any(v is ABSENT or not _is_number(v) for v in values):
                continue
            if all(v == values[0] for v in values):
                out.append(key)
        return out

    @property
    def real(self) -> list[str]:
        """The keys that say the namespaces run differently."""
        apart = {*self.volatile, *self.numeric_type_only}
        return [key for key in self.rows if key not in apart]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data: per key, the value of each namespace that has it."""
        return {
            "names": list(self.names),
            "rows": {
                key: {n: v for n, v in zip(self.names, values, strict=True) if v is not ABSENT}
                for key, values in self.rows.items()
            },
            "volatile": self.volatile,
            "numeric_type_only": self.numeric_type_only,
        }

    def format_table(self, width: int = 40) -> str:
        """A text table of the real differences, a headline that counts them, then the
        per-launch values and the numeric type-only differences under their own titles. Values
        are compact JSON cut to ``width`` characters, with their type where types differ."""
        together = ", ".join(self.names)
        if not self:
            return f"no differences among {together}\n"
        real, volatile, numeric = self.real, self.volatile, self.numeric_type_only
        out: list[str] = []
        if real:
            out += [*self._table(real, width), ""]
        note, sections = set_apart(volatile, numeric, "difference", lambda keys: self._table(keys, width))
        out += [f"{len(real)} key(s) not the same in {together}{note}", *sections]
        return "\n".join(out) + "\n"

    def _table(self, keys: Sequence[str], width: int) -> list[str]:
        header = ("key", *self.names)
        rows: list[tuple[str, ...]] = []
        for key in keys:
            values = self.rows[key]
            typed = len({_kind(v) for v in values if v is not ABSENT}) > 1
            cells = []
            for value in values:
                if value is ABSENT:
                    cells.append("(absent)")
                    continue
                text = _text(value)
                text = text if len(text) <= width else text[: width - 1] + "…"
                cells.append(f"{text} ({_kind(value)})" if typed else text)
            rows.append((key, *cells))
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = [
            "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip()
            for r in [header, *rows]
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return lines


def compare_configs(configs: Mapping[str, Mapping[str, Any]]) -> SideBySide:
    """The keys not the same in all of ``configs`` (namespace -> values, compared in that
    order), with each namespace's value; host objects are made plain data first."""
    flat = {name: flatten(to_plain(values)[0]) for name, values in configs.items()}
    keys = sorted({key for values in flat.values() for key in values})
    rows: dict[str, tuple[Any, ...]] = {}
    for key in keys:
        values = tuple(flat[name].get(key, ABSENT) for name in flat)
        if len({"\0absent" if v is ABSENT else _text(v) for v in values}) > 1:
            rows[key] = values
    return SideBySide(tuple(flat), rows)
