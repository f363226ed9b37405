"""MLflow's rules for keys and params: every config key and metric key shaped to what MLflow
accepts, nothing dropped silently. Standard library only (no ``mlflow`` import), so every rule is
cheap to test against MLflow's own validators.

**The rules** (MLflow's): keys of at most 250 characters from ``[/\\w.\\- :]`` that do not change
under ``posixpath.normpath`` (no ``//``, no leading or trailing ``/``, no ``.``/``..`` parts, not
starting with ``..``), param values of at most 6000 characters, at most 100 params a batch. Metric
keys follow the same key rule.

**The shaped-key rule** (:func:`mlflow_key`): a key MLflow accepts is kept as it is. Otherwise
``@`` becomes ``_at_`` (``passrate/pass@1`` -> ``passrate/pass_at_1``), any other character outside
``[/\\w.\\- :]`` becomes ``_``, empty path parts are dropped (``a//b`` -> ``a/b``, ``/a/`` -> ``a``),
a ``.`` part becomes ``_`` and a ``..`` part ``__``, a key starting with ``..`` gets a leading
``_``, and a key still longer than 250 characters is cut to 241 and ends with ``-`` and the first
8 hex digits of the SHA-256 of the original key. When two keys of one batch would end up the
same, the changed one(s) get that hash suffix too (:func:`shape_mlflow_keys`), so distinct keys
stay distinct whatever their order.

Every key that had to change, and every value that had to be cut, is listed in the result
(:class:`MlflowParams`) and named in a warning on the ``tracking_core.mlflow`` logger; the
complete namespace stays in the section's lossless JSON artifact
(:func:`tracking_core.config.config_json`).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import posixpath
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tracking_core.config import artifact_path, json_text
from tracking_core.records import ConfigSection

__all__ = [
    "MLFLOW_MAX_KEY_LENGTH",
    "MLFLOW_MAX_PARAM_LENGTH",
    "MLFLOW_MAX_PARAMS_PER_BATCH",
    "MlflowKeyShaper",
    "MlflowParams",
    "mlflow_key",
    "mlflow_params",
    "param_text",
    "shape_mlflow_keys",
]

log = logging.getLogger("tracking_core.mlflow")

MLFLOW_MAX_KEY_LENGTH = 250
MLFLOW_MAX_PARAM_LENGTH = 6000
MLFLOW_MAX_PARAMS_PER_BATCH = 100
# MLflow's server refuses log_batch requests over 1 MB; leave room for the JSON around values.
_MLFLOW_BATCH_BYTES = 900_000

_VALID_CHARS = re.compile(r"[/\w.\- :]*")
_BAD_CHAR = re.compile(r"[^/\w.\- :]")
_HASH_LEN = 8


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]


def _mlflow_valid(key: str) -> bool:
    return (
        0 < len(key) <= MLFLOW_MAX_KEY_LENGTH
        and _VALID_CHARS.fullmatch(key) is not None
        and not key.startswith(("/", ".."))
        and key != "."
        and posixpath.normpath(key) == key
    )


def _with_hash(shaped: str, original: str, extra: str = "") -> str:
    suffix = "-" + _hash(original + extra)
    base = shaped[: MLFLOW_MAX_KEY_LENGTH - len(suffix)].rstrip("/")
    return base + suffix


@functools.lru_cache(maxsize=32768)
def mlflow_key(key: str) -> str:
    """``key`` as MLflow accepts it for a param or a metric, by the module's shaped-key rule.

    Pure and cached: the same key is shaped the same way in every process, every time. Keys that
    are already valid come back unchanged.
    """
    if not isinstance(key, str):
        key = str(key)
    if _mlflow_valid(key):
        return key
    text = _BAD_CHAR.sub("_", key.replace("@", "_at_"))
    parts = [part for part in text.split("/") if part]
    parts = ["_" if part == "." else "__" if part == ".." else part for part in parts]
    text = "/".join(parts) or "_"
    if text.startswith(".."):
        text = "_" + text
    if len(text) > MLFLOW_MAX_KEY_LENGTH:
        text = _with_hash(text, key)
    if not _mlflow_valid(text):  # pragma: no cover - the steps above leave nothing invalid
        text = "key-" + _hash(key)
    return text


def shape_mlflow_keys(keys: Iterable[str]) -> dict[str, str]:
    """Shape many keys at once, keeping distinct keys distinct (original -> shaped)."""
    shaped = {key: mlflow_key(key) for key in keys}
    counts = Counter(shaped.values())
    if len(counts) == len(shaped):
        return shaped
    taken = {s for k, s in shaped.items() if counts[s] == 1 or s == k}
    for key in sorted(shaped):
        value = shaped[key]
        if counts[value] > 1 and value != key:
            candidate = _with_hash(value, key)
            n = 0
            while candidate in taken:
                n += 1
                candidate = _with_hash(value, key, f"#{n}")
            shaped[key] = candidate
            taken.add(candidate)
    return shaped


class MlflowKeyShaper:
    """Shapes metric keys as they come and warns once per key that had to change.

    A backend keeps one per run; ``renamed`` then lists every metric key logged under another
    name, for its finish summary.
    """

    def __init__(self) -> None:
        self.renamed: dict[str, str] = {}

    def __call__(self, key: str) -> str:
        shaped = mlflow_key(key)
        if shaped != key and key not in self.renamed:
            self.renamed[key] = shaped
            log.warning(
                "MLflow: metric key %r is logged as %r (MLflow keys allow only [/\\w.\\- :], "
                "at most %d characters, no empty, '.' or '..' path parts)",
                key,
                shaped,
                MLFLOW_MAX_KEY_LENGTH,
            )
        return shaped


def param_text(value: Any) -> str:
    """A param value as text: strings as they are, anything else as JSON (``null``, ``true``)."""
    if isinstance(value, str):
        return value
    return json_text(value)


@dataclass(frozen=True)
class MlflowParams:
    """A section's params as MLflow takes them.

    ``params``: shaped key -> text value, every value within MLflow's length limit.
    ``renamed``: original key -> shaped key, for the keys that had to change.
    ``truncated``: original keys whose value was cut (the cut value ends with a marker naming the
    JSON artifact that holds it whole).
    """

    params: dict[str, str]
    renamed: dict[str, str] = field(default_factory=dict)
    truncated: list[str] = field(default_factory=list)

    def batches(
        self, size: int = MLFLOW_MAX_PARAMS_PER_BATCH, max_bytes: int = _MLFLOW_BATCH_BYTES
    ) -> list[dict[str, str]]:
        """The params in batches of at most ``size`` (and about ``max_bytes`` of UTF-8)."""
        size = max(1, min(size, MLFLOW_MAX_PARAMS_PER_BATCH))
        out: list[dict[str, str]] = []
        batch: dict[str, str] = {}
        used = 0
        for key, value in self.params.items():
            cost = (
                len(key.encode("utf-8", "surrogatepass"))
                + len(value.encode("utf-8", "surrogatepass"))
                + 32
            )
            if batch and (len(batch) >= size or used + cost > max_bytes):
                out.append(batch)
                batch, used = {}, 0
            batch[key] = value
            used += cost
        if batch:
            out.append(batch)
        return out


def _truncate(text: str, original_length: int, where: str) -> str:
    marker = f" …[truncated from {original_length} chars; full value in {where}]"
    return text[: MLFLOW_MAX_PARAM_LENGTH - len(marker)] + marker


def mlflow_params(section: ConfigSection) -> MlflowParams:
    """Shape ``section.params`` for MLflow: valid keys, text values within 6000 characters.

    Renamed keys and cut values are listed in the result and named in a warning; the complete
    values stay in the section's JSON artifact (:func:`tracking_core.config.config_json`).
    """
    keys = shape_mlflow_keys(section.params)
    where = artifact_path(section)
    params: dict[str, str] = {}
    renamed: dict[str, str] = {}
    truncated: list[str] = []
    for key, value in section.params.items():
        shaped = keys[key]
        if shaped != key:
            renamed[key] = shaped
        text = param_text(value)
        if len(text) > MLFLOW_MAX_PARAM_LENGTH:
            text = _truncate(text, len(text), where)
            truncated.append(key)
        params[shaped] = text
    if renamed:
        log.warning(
            "MLflow: %d %s config key(s) renamed to fit MLflow's key rules (original -> logged): %s",
            len(renamed),
            section.namespace,
            ", ".join(f"{k!r} -> {v!r}" for k, v in renamed.items()),
        )
    if truncated:
        log.warning(
            "MLflow: %d %s config value(s) longer than %d characters were cut, with a marker; "
            "the full values are in the run artifact %s: %s",
            len(truncated),
            section.namespace,
            MLFLOW_MAX_PARAM_LENGTH,
            where,
            ", ".join(truncated),
        )
    return MlflowParams(params=params, renamed=renamed, truncated=truncated)
