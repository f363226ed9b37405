"""MLflow's rules for keys and params: every config key and metric key shaped to what MLflow
accepts, nothing dropped silently. Standard library only (no ``mlflow`` import), so every rule is
cheap to test against MLflow's own validators.

**The rules** (MLflow's): keys of at most 250 characters from ``[/\\w.\\- :]`` that do not change
under ``posixpath.normpath`` (no ``//``, no leading or trailing ``/``, no ``.``/``..`` parts, not
starting with ``..``), param values of at most 6000 characters, at most 100 params a batch. Metric
keys follow the same key rule.

**The shaped-key rule** (:func:`mlflow_key`): a key MLflow accepts is kept as it is. Any other
key is *renamed*: ``@`` becomes ``_at_``, any other character outside ``[/\\w.\\- :]`` becomes
``_``, empty path parts are dropped, a ``.`` part becomes ``_`` and a ``..`` part ``__``, a key
starting with ``..`` gets a leading ``_``, the result is cut to 240 characters, and then it
**always** ends with ``--`` and the first 8 hex digits of the SHA-256 of the key as logged:
``passrate/pass@1`` -> ``passrate/pass_at_1--1a19f3c5``, ``a//b`` -> ``a/b--<hash>``.

Why a renamed key never lands on another key of the run, whichever process logs it and in
whatever order: the hash is of the key itself, so two renamed keys differ unless their SHA-256
share 32 leading bits; and a renamed key always ends with ``--`` and 8 hex digits, while a key
kept as given never does -- a key MLflow would accept that happens to end that way is renamed
too (it gains its own suffix). So ``acc/top-1!`` and ``acc/top-1?`` are two series, and ``a//b``
is never logged into a real ``a/b``. Nothing depends on which key came first: every writer and
``tracking-core sync`` rename a key the same way (a rule "add a suffix only on a clash" could
not: two writers each see only their own keys). :func:`mlflow_path` is the same rule for
artifact paths, where ``:`` and ``" ' , [ ] { } \\`` are refused too.

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tracking_core.config import artifact_path, json_text
from tracking_core.plugin_api import ConfigSection

__all__ = [
    "MLFLOW_MAX_KEY_LENGTH",
    "MLFLOW_MAX_PARAM_LENGTH",
    "MLFLOW_MAX_PARAMS_PER_BATCH",
    "MlflowKeyShaper",
    "MlflowParams",
    "mlflow_key",
    "mlflow_path",
    "mlflow_tag_key",
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

_BAD_CHAR = re.compile(r"[^/\w.\- :]")
#: Artifact paths: the key rule, and none of the characters ``log_table`` refuses.
_BAD_PATH_CHAR = re.compile(r"[^/\w.\- ]")
_HASH_LEN = 8
_RENAMED_SEP = "--"
#: How every renamed key ends (and no key kept as given does).
_RENAMED = re.compile(rf"{_RENAMED_SEP}[0-9a-f]{{{_HASH_LEN}}}\Z")


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]


def _mlflow_valid(key: str, bad: re.Pattern[str] = _BAD_CHAR) -> bool:
    return (
        0 < len(key) <= MLFLOW_MAX_KEY_LENGTH
        and bad.search(key) is None
        and not key.startswith(("/", ".."))
        and key != "."
        and posixpath.normpath(key) == key
    )


def _renamed(key: str, bad: re.Pattern[str]) -> str:
    """``key`` by the module's renaming steps, ending with ``--`` and its hash."""
    text = bad.sub("_", key.replace("@", "_at_"))
    parts = [part for part in text.split("/") if part]
    parts = ["_" if part == "." else "__" if part == ".." else part for part in parts]
    text = "/".join(parts) or "_"
    if text.startswith(".."):
        text = "_" + text
    suffix = _RENAMED_SEP + _hash(key)
    text = text[: MLFLOW_MAX_KEY_LENGTH - len(suffix)].rstrip("/") + suffix
    if not _mlflow_valid(text, bad):  # pragma: no cover - the steps above leave nothing invalid
        text = "key" + suffix
    return text


def _shape(key: object, bad: re.Pattern[str]) -> str:
    text = key if isinstance(key, str) else str(key)
    if _mlflow_valid(text, bad) and _RENAMED.search(text) is None:
        return text
    return _renamed(text, bad)


@functools.lru_cache(maxsize=32768)
def mlflow_key(key: str) -> str:
    """``key`` as MLflow accepts it for a param, a metric or a tag, by the module's shaped-key
    rule: kept as it is when MLflow accepts it, else renamed with the hash of the key.

    Pure and cached: the same key is shaped the same way in every process, every time, and two
    distinct keys are never shaped alike (see the module doc).
    """
    return _shape(key, _BAD_CHAR)


@functools.lru_cache(maxsize=8192)
def mlflow_tag_key(key: str) -> str:
    """A key of tracking-core's own run tags (``tracking_core.metric_key/<shaped key>``,
    ``tracking_core.artifact/<path>``), which end with a name shaped already: kept as it is
    when MLflow accepts it (a shaped key's suffix is no sign of renaming here), else renamed by
    the key rule. These tags name one key or path each, so they stay as distinct as those."""
    text = key if isinstance(key, str) else str(key)
    return text if _mlflow_valid(text) else _renamed(text, _BAD_CHAR)


@functools.lru_cache(maxsize=8192)
def mlflow_path(name: str) -> str:
    """A logged name as a run-relative artifact folder (``tables/<path>/...``): the key rule
    with ``:`` refused too (and ``" ' , [ ] { } \\``, which the key rule refuses already), so
    ``log_table`` takes it; distinct names never share a folder."""
    return _shape(name, _BAD_PATH_CHAR)


def shape_mlflow_keys(keys: Iterable[str]) -> dict[str, str]:
    """Shape many keys at once (original -> shaped); distinct keys stay distinct by the rule
    itself, whatever the order or the batch."""
    return {key: mlflow_key(key) for key in keys}


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
