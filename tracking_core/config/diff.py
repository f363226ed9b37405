"""What differs between two configs: the question a PPO user asks first ("what did the critic run
with that the actor did not?").

Types matter: ``kl_coef`` 0.0 in one role and 0 in the other is equal as a number but is a
different value to the code that reads it (slime turns numeric override strings into the base
value's type, so a type change is a bug report waiting to happen). A difference of JSON type is
therefore reported as a *type* change, never hidden.

Two kinds of difference are kept in the data but listed apart, below the real ones, and left out
of the headline count: **per-launch values** (ports, run and job ids, pids, hosts, timestamps:
``env/MASTER_PORT``, ``env/TORCHELASTIC_RUN_ID``, ``MASTER_ADDR``, ``*_pid``), which differ
between any two launches or processes whatever they run, and **the same number in another
type** (``0.0`` vs ``0``), which equal each other as numbers.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..names import path_part
from .convert import child_path, to_plain

__all__ = [
    "Change",
    "ConfigDiff",
    "compare_configs",
    "diff_command",
    "diff_configs",
    "is_volatile",
    "load_config_values",
]

#: The last part of a key (after ``/`` or ``.``) that names a per-launch value: a port, a run,
#: job or pod id, a pid, a host or address, a timestamp. Matched whole or after ``_``/``-``, so
#: ``report`` or ``transport`` are not ports.
VOLATILE_KEY = re.compile(
    r"(?:^|[_-])(?:port|pid|ppid|host|hostname|addr|address|ip|run_id|runid|job_id|jobid|"
    r"pod_name|timestamp|time_stamp|start_time|started_at|created_at)$",
    re.IGNORECASE,
)


def is_volatile(key: str) -> bool:
    """Whether ``key`` names a value that differs per launch or process (see :data:`VOLATILE_KEY`)."""
    return bool(VOLATILE_KEY.search(re.split(r"[/.]", key)[-1]))


def _same_number(a: Any, b: Any) -> bool:
    """Both numbers (not bools), equal as numbers."""
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)) and a == b


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return type(value).__name__


def _same(a: Any, b: Any) -> bool:
    """Equal in value *and* JSON type, all the way down (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _loosely_equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


@dataclass(frozen=True)
class Change:
    """One key whose value differs: ``kind`` is ``"type"`` when the JSON types differ
    (``0.0`` -> ``0``, ``true`` -> ``1``, ``"1"`` -> ``1``), else ``"value"``."""

    old: Any
    new: Any
    kind: str


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


#: The value of a key a config does not have.
ABSENT: Any = _Absent()


class _Differences:
    """What a diff of two configs and a side-by-side of more share: the differing keys, the two
    kinds of difference listed apart from the real ones, and the text that lists them."""

    @property
    def keys(self) -> list[str]:
        """Every key that differs, sorted."""
        raise NotImplementedError

    @property
    def numeric_type_only(self) -> list[str]:
        """Keys whose value is the same number in another type (``0.0`` vs ``0``), per-launch
        keys excepted."""
        raise NotImplementedError

    @property
    def volatile(self) -> list[str]:
        """Differing keys that name per-launch values (ports, ids, pids, hosts, timestamps)."""
        return [key for key in self.keys if is_volatile(key)]

    @property
    def real(self) -> list[str]:
        """The differences that say the configs run differently: every differing key but the
        per-launch values and the numeric type-only changes."""
        apart = {*self.volatile, *self.numeric_type_only}
        return [key for key in self.keys if key not in apart]

    def _apart(self) -> dict[str, list[str]]:
        return {"volatile": self.volatile, "numeric_type_only": self.numeric_type_only}

    def _text(self, headline: str, numeric_noun: str, table: Callable[[Sequence[str]], list[str]]) -> str:
        """The real differences as a ``table``, the ``headline`` with a note that counts the
        differences listed apart, then their sections (per-launch values, the same number in
        another type), each a ``table`` of its keys."""
        real, volatile, numeric = self.real, self.volatile, self.numeric_type_only
        out = [*table(real), ""] if real else []
        apart = []
        if volatile:
            apart.append(f"{len(volatile)} per-launch value(s)")
        if numeric:
            apart.append(f"{len(numeric)} numeric type-only {numeric_noun}(s)")
        out.append(headline + (f" (not counted, listed below: {', '.join(apart)})" if apart else ""))
        for title, keys in (
            ("Per-launch values (ports, run and job ids, pids, hosts, timestamps)", volatile),
            ("The same number in another type", numeric),
        ):
            if keys:
                out += ["", f"{title}: {len(keys)}", *table(keys)]
        return "\n".join(out) + "\n"


@dataclass(frozen=True)
class ConfigDiff(_Differences):
    """The difference from config ``a`` to config ``b``.

    ``added``: keys only in ``b``; ``removed``: keys only in ``a``; ``changed``: keys in both
    with another value or type. Nested mappings are compared key by key (paths like ``a.b``);
    lists are compared whole. All three are sorted by key.
    """

    added: dict[str, Any] = field(default_factory=dict)
    removed: dict[str, Any] = field(default_factory=dict)
    changed: dict[str, Change] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    @property
    def keys(self) -> list[str]:
        """Every key that differs, sorted."""
        return sorted({*self.added, *self.removed, *self.changed})

    @property
    def type_changes(self) -> list[str]:
        """Keys whose value changed JSON type."""
        return [key for key, change in self.changed.items() if change.kind == "type"]

    @property
    def numeric_type_only(self) -> list[str]:
        """Keys whose value is the same number in another type (``0.0`` vs ``0``), per-launch
        keys excepted."""
        return [
            key
            for key, change in self.changed.items()
            if change.kind == "type" and not is_volatile(key) and _same_number(change.old, change.new)
        ]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data, for ``--json`` output or a report."""
        return {
            "added": dict(self.added),
            "removed": dict(self.removed),
            "changed": {
                k: {"old": c.old, "new": c.new, "kind": c.kind} for k, c in self.changed.items()
            },
            **self._apart(),
        }

    def format_table(self, a_label: str = "a", b_label: str = "b", width: int = 48) -> str:
        """Aligned text tables, one row per differing key: the real differences and a headline
        that counts only them, then the per-launch values and the numeric type-only changes,
        each under its own title.

        Values are shown as compact JSON, cut to ``width`` characters; a type change shows both
        types. Absent values show as ``(absent)``.
        """
        if not self:
            return f"no differences between {a_label} and {b_label}\n"
        real = self.real
        headline = f"{len(real)} difference(s) between {a_label} and {b_label}"
        n_type = len([key for key in self.type_changes if key in real])
        if n_type:
            headline += f", {n_type} of them a type change"
        return self._text(headline, "change", lambda keys: self._table(keys, a_label, b_label, width))

    def _table(self, keys: Sequence[str], a_label: str, b_label: str, width: int) -> list[str]:
        rows: list[tuple[str, ...]] = [("key", "change", a_label, b_label)]
        for key in keys:
            if key in self.added:
                kind, values = "added", (ABSENT, self.added[key])
            elif key in self.removed:
                kind, values = "removed", (self.removed[key], ABSENT)
            else:
                change = self.changed[key]
                kind, values = change.kind, (change.old, change.new)
            rows.append((key, kind, *_cells(values, kind == "type", width)))
        return aligned(rows)


def aligned(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """``rows`` (the header first) as text columns, a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _cell(value: Any, width: int = 0) -> str:
    """Compact JSON, cut to ``width`` (0: whole): equal texts are equal values of one JSON type
    (``0.0`` is not ``0``)."""
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if not width or len(text) <= width else text[: width - 1] + "…"


def _cells(values: Sequence[Any], typed: bool, width: int) -> list[str]:
    """A table's cells for ``values``: ``(absent)`` for :data:`ABSENT`, else :func:`_cell`, with
    the JSON type after it when ``typed``."""
    return [
        "(absent)" if value is ABSENT else _cell(value, width) + (f" ({_kind(value)})" if typed else "")
        for value in values
    ]


def _diff(a: Mapping[str, Any], b: Mapping[str, Any], path: str, out: ConfigDiff) -> None:
    for key in a.keys() | b.keys():
        where = child_path(path, key)
        if key not in b:
            out.removed[where] = a[key]
        elif key not in a:
            out.added[where] = b[key]
        else:
            old, new = a[key], b[key]
            if isinstance(old, dict) and isinstance(new, dict):
                _diff(old, new, where, out)
            elif not _same(old, new):
                # Equal to Python (0.0 == 0, [True] == [1]) yet not the same: only types differ.
                loose = _loosely_equal(old, new)
                kind = "type" if _kind(old) != _kind(new) or loose else "value"
                out.changed[where] = Change(old, new, kind)


def diff_configs(a: Mapping[str, Any], b: Mapping[str, Any]) -> ConfigDiff:
    """Compare two configs (host objects are converted to plain data first, like the pipeline).

    Pass the *values* of two sections (``section.values``, or the ``values`` of two JSON
    artifacts) to compare namespaces, not their prefixed params.
    """
    plain_a, _ = to_plain(a)
    plain_b, _ = to_plain(b)
    raw = ConfigDiff()
    _diff(plain_a, plain_b, "", raw)
    return ConfigDiff(*(dict(sorted(part.items())) for part in (raw.added, raw.removed, raw.changed)))


def load_config_values(path: str | Path) -> dict[str, Any]:
    """The ``values`` of a saved config artifact (the output of ``config_json``).

    Raises OSError or ValueError with the path in the message when it cannot be read.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a JSON config artifact ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("values"), dict):
        raise ValueError(f"{path}: no 'values' mapping; not written by tracking-core")
    return doc["values"]


def _find_run(run: str, tracking_dir: str) -> Path | None:
    """A run directory given as a path, a run id, or a unique prefix of a run id."""
    if not run:
        return None
    direct = Path(run)
    if (direct / "config").is_dir():
        return direct
    runs = Path(tracking_dir) / "runs"
    for candidate in (runs / path_part(run, warn=False), direct):
        if candidate.is_dir():
            return candidate
    matches = [p for p in runs.iterdir() if p.is_dir() and p.name.startswith(run)] if runs.is_dir() else []
    return matches[0] if len(matches) == 1 else None


def diff_command(
    run: str,
    roles: Sequence[str],
    tracking_dir: str,
    *,
    exit_code: bool = False,
) -> int:
    """``tracking-core diff RUN [--roles actor critic]``: print how the roles' configs differ.

    ``run`` is a run directory or a run id (or a unique prefix of one) under
    ``<tracking_dir>/runs/``; each namespace is read from ``<run_dir>/config/<namespace>.json``
    (``launch`` names the launch config). With more than two roles, every key that is not the
    same in all of them is one row with its value in each (:func:`compare_configs`). Returns 0,
    or 2 when a run or config cannot be read (the reason on stderr); with ``exit_code`` (like
    ``git diff --exit-code``) 1 when there are differences.
    """
    roles = list(roles)
    if len(roles) < 2:
        print(f"tracking-core diff: need two roles to compare, got {roles}", file=sys.stderr)
        return 2
    run_dir = _find_run(run, tracking_dir)
    if run_dir is None:
        print(
            f"tracking-core diff: no run {run!r}: not a directory, and not a run id under "
            f"{Path(tracking_dir) / 'runs'}",
            file=sys.stderr,
        )
        return 2
    config_dir = run_dir / "config"
    values: dict[str, dict[str, Any]] = {}
    for role in roles:
        path = config_dir / f"{path_part(role, 'role')}.json"
        try:
            values[role] = load_config_values(path)
        except (OSError, ValueError) as exc:
            available = (
                sorted(p.stem for p in config_dir.glob("*.json")) if config_dir.is_dir() else []
            )
            print(
                f"tracking-core diff: cannot read the {role!r} config of {run_dir}: {exc}; "
                f"namespaces saved there: {', '.join(available) or 'none'}",
                file=sys.stderr,
            )
            return 2
    result: ConfigDiff | SideBySide
    if len(values) > 2:
        result = compare_configs(values)
        sys.stdout.write(result.format_table())
    else:
        base, other = list(values)[0], list(values)[-1]  # a role named twice is one config
        result = diff_configs(values[base], values[other])
        sys.stdout.write(result.format_table(base, other))
    return 1 if (exit_code and result) else 0


# -- Three or more configs side by side: ``tracking-core diff RUN --roles actor critic launch``.
#
# Two configs read best as a change (above: old, new, the kind of change). With more, the
# question is "which keys are not the same everywhere, and what is each one's value in each
# namespace?": one row per such key, one column per namespace, ``(absent)`` where a namespace has
# no such key. Nested mappings are compared key by key (paths like ``a.b``), lists whole.
#
# Sameness is value *and* JSON type, as above (``0.0`` and ``0`` are not the same), and
# the same two kinds of row are listed apart, below the real differences and out of the headline
# count: per-launch values (:func:`is_volatile`: ports, run and job ids, pids, hosts,
# timestamps) and the same number in another type in every namespace.


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


@dataclass(frozen=True)
class SideBySide(_Differences):
    """The keys whose value is not the same in every namespace of ``names``, each with its value
    per namespace (in the order of ``names``; :data:`ABSENT` where a namespace lacks it)."""

    names: tuple[str, ...]
    rows: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.rows)

    @property
    def keys(self) -> list[str]:
        """Every key that differs, sorted."""
        return list(self.rows)

    @property
    def numeric_type_only(self) -> list[str]:
        """Keys present everywhere with one number in more than one type (``0.0``, ``0``)."""
        return [
            key
            for key, values in self.rows.items()
            if not is_volatile(key) and all(_same_number(v, values[0]) for v in values)
        ]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data: per key, the value of each namespace that has it."""
        return {
            "names": list(self.names),
            "rows": {
                key: {n: v for n, v in zip(self.names, values, strict=True) if v is not ABSENT}
                for key, values in self.rows.items()
            },
            **self._apart(),
        }

    def format_table(self, width: int = 40) -> str:
        """A text table of the real differences, a headline that counts them, then the
        per-launch values and the numeric type-only differences under their own titles. Values
        are compact JSON cut to ``width`` characters, with their type where types differ."""
        together = ", ".join(self.names)
        if not self:
            return f"no differences among {together}\n"
        headline = f"{len(self.real)} key(s) not the same in {together}"
        return self._text(headline, "difference", lambda keys: self._table(keys, width))

    def _table(self, keys: Sequence[str], width: int) -> list[str]:
        rows: list[tuple[str, ...]] = [("key", *self.names)]
        for key in keys:
            values = self.rows[key]
            typed = len({_kind(v) for v in values if v is not ABSENT}) > 1
            rows.append((key, *_cells(values, typed, width)))
        return aligned(rows)


def compare_configs(configs: Mapping[str, Mapping[str, Any]]) -> SideBySide:
    """The keys not the same in all of ``configs`` (namespace -> values, compared in that
    order), with each namespace's value; host objects are made plain data first."""
    flat = {name: flatten(to_plain(values)[0]) for name, values in configs.items()}
    keys = sorted({key for values in flat.values() for key in values})
    rows: dict[str, tuple[Any, ...]] = {}
    for key in keys:
        values = tuple(flat[name].get(key, ABSENT) for name in flat)
        if len({"\0absent" if v is ABSENT else _cell(v) for v in values}) > 1:
            rows[key] = values
    return SideBySide(tuple(flat), rows)
