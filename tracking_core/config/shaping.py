"""Per-backend shapes of a config section: each within its tracker's rules, nothing dropped silently.

A :class:`~tracking_core.records.ConfigSection` is shaped here for each backend, as pure functions
(no tracker library imported), so every rule is testable against the trackers' own validators:

* **MLflow** (:func:`mlflow_params`, :func:`mlflow_key`): keys of at most 250 characters from
  ``[/\\w.\\- :]`` that do not change under ``posixpath.normpath`` (no ``//``, no leading or
  trailing ``/``, no ``.``/``..`` parts, not starting with ``..``), values of at most 6000
  characters, at most 100 params a batch. Metric keys follow the same key rule.
* **W&B** (:func:`wandb_config`): the flat prefixed keys, values as they are.
* **TensorBoard** (:func:`tensorboard_hparams`, :func:`config_text`): scalars as hparams, the
  whole config as markdown text.
* **Everywhere** (:func:`config_json`): the complete namespace, losslessly, as one JSON artifact
  named :func:`artifact_path` (``config/<namespace>.json``).

Every key is either logged by a shape or named, with the reason, in a warning on the
``tracking_core.config`` logger (and in the shape's own lists: ``renamed``, ``truncated``,
``left_out``).

**The shaped-key rule** (:func:`mlflow_key`): a key MLflow accepts is kept as it is. Otherwise
``@`` becomes ``_at_`` (``passrate/pass@1`` -> ``passrate/pass_at_1``), any other character outside
``[/\\w.\\- :]`` becomes ``_``, empty path parts are dropped (``a//b`` -> ``a/b``, ``/a/`` -> ``a``),
a ``.`` part becomes ``_`` and a ``..`` part ``__``, a key starting with ``..`` gets a leading
``_``, and a key still longer than 250 characters is cut to 241 and ends with ``-`` and the first
8 hex digits of the SHA-256 of the original key. When two keys of one batch would end up the
same, the changed one(s) get that hash suffix too (:func:`shape_mlflow_keys`), so distinct keys
stay distinct whatever their order.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..records import ConfigSection
from .convert import to_plain

__all__ = [
    "MLFLOW_MAX_KEY_LENGTH",
    "MLFLOW_MAX_PARAM_LENGTH",
    "MLFLOW_MAX_PARAMS_PER_BATCH",
    "MlflowParams",
    "MlflowKeyShaper",
    "artifact_path",
    "config_json",
    "config_text",
    "mlflow_key",
    "mlflow_params",
    "param_text",
    "shape_mlflow_keys",
    "tensorboard_hparams",
    "wandb_config",
]

log = logging.getLogger("tracking_core.config")

MLFLOW_MAX_KEY_LENGTH = 250
MLFLOW_MAX_PARAM_LENGTH = 6000
MLFLOW_MAX_PARAMS_PER_BATCH = 100
# MLflow's server refuses log_batch requests over 1 MB; leave room for the JSON around values.
_MLFLOW_BATCH_BYTES = 900_000

_VALID_CHARS = re.compile(r"[/\w.\- :]*")
_BAD_CHAR = re.compile(r"[^/\w.\- :]")
_HASH_LEN = 8

#: Format tag of :func:`config_json` documents.
CONFIG_FORMAT = "tracking-core/config@1"


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


def artifact_path(section: ConfigSection) -> str:
    """Where a section's lossless JSON goes, relative to the run: ``config/<namespace>.json``."""
    return f"config/{section.namespace}.json"


def _dumps(value: Any, **kwargs: Any) -> str:
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except (TypeError, ValueError):
        # Not plain data (a section built by hand): convert first, so this still never fails.
        plain, _ = to_plain({"v": value})
        return json.dumps(plain["v"], allow_nan=False, **kwargs)


_encode_str = json.JSONEncoder(ensure_ascii=False).encode


def _json_text(value: Any) -> str:
    """Compact JSON of plain data; scalars without building an encoder (it is the hot path)."""
    kind = type(value)
    if kind is str:
        return _encode_str(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float and value == value and value not in (float("inf"), float("-inf")):
        return float.__repr__(value)
    return _dumps(value, sort_keys=True, ensure_ascii=False)


def param_text(value: Any) -> str:
    """A param value as text: strings as they are, anything else as JSON (``null``, ``true``)."""
    if isinstance(value, str):
        return value
    return _json_text(value)


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
    values stay in the section's JSON artifact (:func:`config_json`).
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


def wandb_config(section: ConfigSection) -> dict[str, Any]:
    """The flat prefixed keys for ``wandb.config`` (nested values stay values).

    W&B keeps no key whose value is an empty mapping (``train_env_vars={}``): those are named
    here; they are in the run's ``tracking-core/config/<namespace>.json`` file.
    """
    params = dict(section.params)
    empty = [key for key, value in params.items() if isinstance(value, Mapping) and not value]
    if empty:
        log.info(
            "W&B: %d %s config key(s) with an empty mapping value, which W&B's config does not "
            "keep; they are in %s: %s",
            len(empty),
            section.namespace,
            artifact_path(section),
            ", ".join(empty),
        )
    return params


_HPARAM_TYPES = (bool, int, float, str)


def tensorboard_hparams(
    section: ConfigSection,
) -> tuple[dict[str, float | int | str | bool], list[str]]:
    """Scalar params for TensorBoard's hparams, and ``"key: reason"`` for each key left out.

    TensorBoard hparams take bool, int, float and str only: null and nested values are left out
    (and named in one warning per reason); they are in the config text (:func:`config_text`) and
    the JSON artifact.
    """
    hparams: dict[str, float | int | str | bool] = {}
    left_out: list[str] = []
    nulls: list[str] = []
    nested: list[str] = []
    for key, value in section.params.items():
        if isinstance(value, _HPARAM_TYPES):
            hparams[key] = value
        elif value is None:
            nulls.append(key)
            left_out.append(f"{key}: null (TensorBoard hparams have no null)")
        else:
            nested.append(key)
            left_out.append(
                f"{key}: {type(value).__name__} value (TensorBoard hparams take scalars only)"
            )
    for keys, reason in (
        (nulls, "null values (TensorBoard hparams have no null)"),
        (nested, "nested values (TensorBoard hparams take bool, int, float or str)"),
    ):
        if keys:
            # Not a loss: the same keys are in the config text logged beside the hparams, so
            # this is information, not a warning (a slime namespace has ~400 null keys).
            log.info(
                "TensorBoard: %d %s config key(s) not logged as hparams, %s; "
                "they are in the config text and %s: %s",
                len(keys),
                section.namespace,
                reason,
                artifact_path(section),
                ", ".join(keys),
            )
    return hparams, left_out


_MD_SPECIAL = "\\`*_[]<>|#"  # backslash first: later escapes add backslashes


def _md(text: str) -> str:
    """Text shown literally by markdown (backslash escapes of punctuation are plain CommonMark)."""
    for char in _MD_SPECIAL:
        if char in text:
            text = text.replace(char, "\\" + char)
    return text


def _md_code(text: str) -> str:
    """Text as a code span in a table cell: literal, monospace, only ``|`` needs escaping."""
    if "`" in text or "\n" in text:
        return _md(text)
    if "|" in text:
        text = text.replace("|", "\\|")
    return f"`{text}`"


def config_text(section: ConfigSection) -> str:
    """The whole namespace as markdown (TensorBoard's text plugin renders it).

    One table row per top-level key (with the namespace's prefix), values as compact JSON, then
    the conversions and redactions of the report.
    """
    prefix = section.prefix
    lines = [
        f"### config: {_md(section.namespace)}",
        "",
        f"{len(section.values)} keys"
        + (f", prefix `{prefix}`" if prefix else "")
        + (", logged as parameters" if section.params else ", not logged as parameters")
        + f"; lossless copy: {_md(artifact_path(section))}",
        "",
        "| key | value |",
        "|---|---|",
    ]
    for key, value in section.values.items():
        lines.append(f"| {_md_code(prefix + key)} | {_md_code(_json_text(value))} |")
    report = section.report or {}
    conversions = report.get("conversions") or []
    if conversions:
        lines += [
            "",
            f"#### conversions ({len(conversions)})",
            "",
            "| path | from | to | note |",
            "|---|---|---|---|",
        ]
        for c in conversions:
            if isinstance(c, Mapping):
                cells = (
                    c.get("path", ""),
                    c.get("from_type", ""),
                    c.get("to", ""),
                    c.get("note", ""),
                )
                lines.append("| " + " | ".join(_md(str(x)) for x in cells) + " |")
    redacted = report.get("redacted") or []
    if redacted:
        lines += ["", f"#### redacted ({len(redacted)})", ""]
        lines += [f"- {_md(str(path))}" for path in redacted]
    return "\n".join(lines) + "\n"


def config_json(section: ConfigSection) -> str:
    """The lossless JSON artifact of a namespace: its values and the pipeline's report.

    ASCII-only (non-ASCII characters escaped), so writing it never depends on the locale.
    Read it back with :func:`json.loads`; ``values`` is the namespace.
    """
    doc = {
        "format": CONFIG_FORMAT,
        "namespace": section.namespace,
        "role": section.role,
        "prefix": section.prefix,
        "logged_as_params": bool(section.params),
        "values": dict(section.values),
        "report": dict(section.report or {}),
    }
    return _dumps(doc, sort_keys=True, indent=1, ensure_ascii=True) + "\n"
