"""The data that crosses the hook contract: metric records, config sections, run status, and
the rich kinds (tables, histograms, texts, artifacts).

Everything here is plain and picklable, so the same objects can be journaled, replayed and sent
to a backend's worker without conversion.
"""

from __future__ import annotations

import enum
import json as _json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


class RunStatus(str, enum.Enum):
    """How a run ended. Backends map these onto their own states."""

    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


class _Keyed:
    """``name``: the key with the role prefix (what backends without a native place for the
    role show)."""

    __slots__ = ()
    key: str
    prefix: str

    @property
    def name(self) -> str:
        return self.prefix + self.key


class _OnAxis(_Keyed):
    """``axis``: the flat name of the step axis, prefixed like the key."""

    __slots__ = ()
    step_key: str | None

    @property
    def axis(self) -> str | None:
        return None if self.step_key is None else self.prefix + self.step_key


@dataclass(frozen=True, slots=True)
class MetricRecord(_OnAxis):
    """One metric value, as logged.

    ``key`` is the name the caller logged (``train/pg_loss``); ``prefix`` is what the key
    convention puts before it for this role (``"actor/"``, or ``""`` when the host already names
    its metrics per role). ``name`` is the flat name backends without a native place for the role
    use. ``step_key`` names the step axis (``train/step``); ``timestamp`` is fixed when the value
    was logged, so a retried or replayed record is the same record. ``seq`` is unique within the
    writing process and orders its records.
    """

    key: str
    value: float
    step: int | None
    timestamp: float
    seq: int
    role: str | None = None
    prefix: str = ""
    step_key: str | None = None


#: Format tag of a config section's JSON document (:attr:`ConfigSection.json`).
CONFIG_FORMAT = "tracking-core/config@1"


@dataclass(frozen=True)
class ConfigSection:
    """One namespace of config: the launch config (``role`` None) or one role's effective config.

    ``values`` is the complete, converted and redacted config of the namespace (plain JSON data,
    nested values kept as values). ``params`` holds the flat, prefixed keys a backend shows as
    parameters (``actor/lr``, ``prefix`` being ``"actor/"``); it is empty when the key style sends the namespace only to its JSON
    artifact. ``namespace`` names the artifact (``launch``, ``actor``). ``report`` lists what the
    pipeline changed on the way (lossy conversions, redactions, collector conflicts) so a backend
    can store it beside the config.
    """

    role: str | None
    namespace: str
    prefix: str
    values: Mapping[str, Any]
    params: Mapping[str, Any]
    report: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def json(self) -> str:
        """The section's lossless JSON artifact (:func:`tracking_core.config.config_json`),
        made once and carried with it: the run saves it and each backend logs the same text.
        ASCII-only, so writing it never depends on the locale; never fails: values that are not
        plain data (a section built by hand) are converted first."""
        doc = {
            "format": CONFIG_FORMAT,
            "namespace": self.namespace,
            "role": self.role,
            "prefix": self.prefix,
            "logged_as_params": bool(self.params),
            "values": dict(self.values),
            "report": dict(self.report or {}),
        }
        try:
            text = _json.dumps(doc, allow_nan=False, sort_keys=True, indent=1, ensure_ascii=True)
        except (TypeError, ValueError):
            from .config.convert import to_plain

            plain, _ = to_plain({"v": doc})
            text = _json.dumps(plain["v"], allow_nan=False, sort_keys=True, indent=1, ensure_ascii=True)
        return text + "\n"


# -- the rich kinds ------------------------------------------------------------------------------
#: A table cell as it reaches a backend: plain JSON scalars (other values arrive as their ``str``).
Cell = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class TableRecord(_OnAxis):
    """A table logged at a step: rows of cells under named columns (rollout samples).

    ``rows`` are tuples in ``columns`` order, strings already redacted. ``key``, ``prefix``,
    ``step``, ``step_key``, ``timestamp`` and ``seq`` mean what they mean for a
    :class:`MetricRecord`.
    """

    key: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    step: int | None
    timestamp: float
    seq: int
    role: str | None = None
    prefix: str = ""
    step_key: str | None = None


    def as_dicts(self) -> list[dict[str, Cell]]:
        return [dict(zip(self.columns, row, strict=False)) for row in self.rows]


@dataclass(frozen=True, slots=True)
class HistogramRecord(_OnAxis):
    """A distribution logged at a step, as bins: ``counts[i]`` values fell in
    ``[edges[i], edges[i + 1])`` (the last bin includes its right edge), with the exact summary
    of the values (``count``, ``min``, ``max``, ``sum``, ``sum_squares`` and ``percentiles``
    such as ``{"p50": ...}``). Non-finite values are left out and counted in ``non_finite``."""

    key: str
    counts: tuple[int, ...]
    edges: tuple[float, ...]
    count: int
    min: float
    max: float
    sum: float
    sum_squares: float
    percentiles: Mapping[str, float]
    step: int | None
    timestamp: float
    seq: int
    role: str | None = None
    prefix: str = ""
    step_key: str | None = None
    non_finite: int = 0


    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else float("nan")

    def summary(self) -> dict[str, float]:
        """The summary series a tracker without histograms shows: ``count``, ``mean``, ``min``,
        ``max`` and the percentiles, by suffix."""
        out = {"count": float(self.count), "mean": self.mean, "min": self.min, "max": self.max}
        out.update(self.percentiles)
        return out


@dataclass(frozen=True, slots=True)
class TextRecord(_OnAxis):
    """A text logged at a step (already redacted)."""

    key: str
    text: str
    step: int | None
    timestamp: float
    seq: int
    role: str | None = None
    prefix: str = ""
    step_key: str | None = None



@dataclass(frozen=True, slots=True)
class ArtifactRecord(_Keyed):
    """A file or a directory (a checkpoint, a samples dump, a plot), as it was when logged.

    ``path`` is where to read it: the snapshot taken when it was logged (``snapshot`` True), or,
    where no snapshot could be taken, the caller's ``source`` path as it is now. ``files`` lists
    ``(relative path, size)`` of every file (one entry, the file's name, for a file); ``size``
    is their total. ``key`` is the artifact's name (``name`` adds the role prefix); ``kind``
    is what the caller said it is (``artifact``, ``model``, ``checkpoint``, ...).
    """

    key: str
    kind: str
    path: str
    source: str
    is_dir: bool
    size: int
    files: tuple[tuple[str, int], ...]
    timestamp: float
    seq: int
    role: str | None = None
    prefix: str = ""
    snapshot: bool = True


    def sha256(self) -> str:
        """The SHA-256 of the file, or of a directory's ``relative path NUL file sha256``
        lines in path order (computed when asked: it reads every byte)."""
        import hashlib
        from pathlib import Path

        root = Path(self.path)
        if not self.is_dir:
            return _file_sha256(root)
        lines = [f"{rel}\0{_file_sha256(root / rel)}\n" for rel, _ in sorted(self.files)]
        return hashlib.sha256("".join(lines).encode()).hexdigest()


def _file_sha256(path: Any) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
