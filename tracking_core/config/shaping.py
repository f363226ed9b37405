"""The tracker-neutral shapes of a config section: its lossless JSON artifact and its markdown.

Every backend keeps each namespace whole, whatever its tracker's own rules leave out of params:

* :func:`config_json`: the complete namespace and the pipeline's report, losslessly, as one JSON
  document, stored as the run artifact (or run file) :func:`artifact_path`
  (``config/<namespace>.json``);
* :func:`config_text`: the namespace as a markdown table, for trackers that show text, without
  the tracking options left unset (:func:`shown_values`: what ``show`` prints too);
* :func:`json_text`: one value as compact JSON, the text form trackers that store strings use;
* :func:`job_params`: the params that hold the job: no tracking option (where the data goes) in
  any role's params, the set ones once in the launch config's ``tracking/`` group, no null value.

Each tracker's own rules (which keys it accepts, how long a value may be, which values its params
can hold) live in that tracker's plugin, never here. Pure functions, no tracker library imported.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Collection, Mapping
from typing import Any

from ..names import path_part
from ..records import CONFIG_FORMAT, ConfigSection
from .convert import to_plain

__all__ = [
    "CONFIG_FORMAT",
    "TRACKING_GROUP",
    "artifact_path",
    "config_json",
    "config_text",
    "job_params",
    "json_text",
    "shown_values",
]

#: The prefix of the launch config's params that hold the tracking options.
TRACKING_GROUP = "tracking/"
#: The report entry that names a section's tracking options left unset (null): kept in
#: ``values`` (the JSON artifact is lossless), left out of the config text and ``show``.
UNSET_TRACKING = "unset_tracking_options"


def job_params(section: ConfigSection, tracking: Collection[str]) -> ConfigSection:
    """``section`` with params that hold the job and nothing else.

    ``tracking`` names the tracking options (argparse destinations:
    :func:`tracking_core.options.tracking_option_dests`): where the data goes, not what the job
    is. None of them stays among a namespace's params; the launch config (``role`` None) gives
    those that are set one ``tracking/<option>`` param each, once for the job. A key whose value
    is null is no param either: it says nothing a tracker's params can show. ``values`` is left
    whole, so the JSON artifact and the config text keep every key; a section that goes to its
    JSON artifact only (no params: the launch config in the ``slime`` key style) stays so.
    The tracking options left unset are named in the report (:data:`UNSET_TRACKING`).
    """
    unset = sorted(name for name, value in section.values.items() if value is None and name in tracking)
    if unset:
        section = dataclasses.replace(section, report={**section.report, UNSET_TRACKING: unset})
    if not section.params:
        return section
    prefix = section.prefix
    params = {
        key: value
        for key, value in section.params.items()
        if value is not None and key.removeprefix(prefix) not in tracking
    }
    if section.role is None:
        for name, value in section.values.items():
            if name in tracking and value is not None:
                params[prefix + TRACKING_GROUP + name] = value
    return dataclasses.replace(section, params=params)


def artifact_path(section: ConfigSection) -> str:
    """Where a section's lossless JSON goes, relative to the run: ``config/<namespace>.json``,
    the namespace as a file name (:func:`tracking_core.names.path_part`): a role named
    ``../x`` cannot put it anywhere else."""
    return f"config/{path_part(section.namespace, 'config namespace')}.json"


def _dumps(value: Any, **kwargs: Any) -> str:
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except (TypeError, ValueError):
        # Not plain data (a section built by hand): convert first, so this still never fails.
        plain, _ = to_plain({"v": value})
        return json.dumps(plain["v"], allow_nan=False, **kwargs)


_encode_str = json.JSONEncoder(ensure_ascii=False).encode


def json_text(value: Any) -> str:
    """Compact JSON of plain data (sorted keys, non-ASCII kept); scalars without building an
    encoder (it is the hot path). Never raises: a value that is not plain data is converted first."""
    kind = type(value)
    if kind is str:
        return _encode_str(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return _dumps(value, sort_keys=True, ensure_ascii=False)


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
    """The namespace as markdown, for trackers that show text.

    One table row per top-level key (with the namespace's prefix), values as compact JSON, then
    the conversions and redactions of the report. The tracking options left unset are counted,
    not listed (:func:`shown_values`); the lossless copy keeps them.
    """
    prefix = section.prefix
    values = shown_values(section.values, section.report)
    hidden = len(section.values) - len(values)
    lines = [
        f"### config: {_md(section.namespace)}",
        "",
        f"{len(values)} keys"
        + (f", prefix `{prefix}`" if prefix else "")
        + (f", {len(section.params)} logged as parameters" if section.params else ", not logged as parameters")
        + (f"; {hidden} unset tracking options not shown" if hidden else "")
        + f"; lossless copy: {_md(artifact_path(section))}",
        "",
        "| key | value |",
        "|---|---|",
    ]
    for key, value in values.items():
        lines.append(f"| {_md_code(prefix + key)} | {_md_code(json_text(value))} |")
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
                cells = [_md(str(c.get(name, ""))) for name in ("path", "from_type", "to", "note")]
                lines.append("| " + " | ".join(cells) + " |")
    redacted = report.get("redacted") or []
    if redacted:
        lines += ["", f"#### redacted ({len(redacted)})", ""]
        lines += [f"- {_md(str(path))}" for path in redacted]
    return "\n".join(lines) + "\n"


def shown_values(values: Mapping[str, Any], report: Mapping[str, Any] | None) -> dict[str, Any]:
    """``values`` without the tracking options the report names as unset (:data:`UNSET_TRACKING`):
    what a reader of the config is shown."""
    unset = set((report or {}).get(UNSET_TRACKING) or ())
    return {key: value for key, value in values.items() if key not in unset}


def config_json(section: ConfigSection) -> str:
    """The lossless JSON artifact of a namespace: its values and the pipeline's report.

    ASCII-only (non-ASCII characters escaped), so writing it never depends on the locale.
    Read it back with :func:`json.loads`; ``values`` is the namespace. Made once per section
    (:attr:`ConfigSection.json`).
    """
    return section.json
