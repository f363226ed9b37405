"""The config pipeline: host config -> plain data -> redacted -> keyed, plus the shapes every
backend shares.

Pure functions, no tracker library imported (at import time or when called), so every step can be
tested and run on the training process without cost surprises. No tracker's rules live here: each
backend's plugin shapes a section for its own tracker (key and value limits, which values its
params can hold), from the plain, redacted section built here.

* :mod:`.convert` — :func:`to_plain`: any host object to sorted JSON data, with a
  :class:`Conversion` for everything lossy.
* :mod:`.secrets` — :class:`Redactor`, :func:`redact`, :func:`redact_text`, :func:`redact_argv`,
  :func:`redact_name`.
* :mod:`.keys` — :func:`build_section`: the whole pipeline, keyed by the namespace convention.
* :mod:`.shaping` — the tracker-neutral shapes: :func:`config_json` (the lossless artifact, at
  :func:`artifact_path`), :func:`config_text` (markdown), :func:`json_text` (one value as JSON),
  :func:`job_params` (params without the tracking options, which go to the launch config's
  ``tracking/`` group).
* :mod:`.diff` — :func:`diff_configs` and the ``tracking-core diff`` command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .convert import Conversion, to_plain
    from .diff import Change, ConfigDiff, diff_command, diff_configs, load_config_values
    from .keys import KEY_STYLES, LAUNCH, build_section, key_prefix, namespace_for
    from .secrets import (
        Redactor,
        classify_name,
        default_redactor,
        fingerprint,
        redact,
        redact_argv,
        redact_name,
        redact_text,
    )
    from .shaping import (
        CONFIG_FORMAT,
        TRACKING_GROUP,
        artifact_path,
        config_json,
        config_text,
        job_params,
        json_text,
    )

#: Each name and its module, imported on first use: a module that needs only the redaction
#: (``from tracking_core.config.secrets import redact_text``) does not pay for the diff's.
_LAZY = {
    name: module
    for module, names in {
        ".convert": "Conversion to_plain",
        ".diff": "Change ConfigDiff diff_command diff_configs load_config_values",
        ".keys": "KEY_STYLES LAUNCH build_section key_prefix namespace_for",
        ".secrets": "Redactor classify_name default_redactor fingerprint redact redact_argv redact_name redact_text",
        ".shaping": "CONFIG_FORMAT TRACKING_GROUP artifact_path config_json config_text job_params json_text",
    }.items()
    for name in names.split()
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "CONFIG_FORMAT",
    "KEY_STYLES",
    "LAUNCH",
    "TRACKING_GROUP",
    "Change",
    "ConfigDiff",
    "Conversion",
    "Redactor",
    "artifact_path",
    "build_section",
    "classify_name",
    "config_json",
    "config_text",
    "default_redactor",
    "diff_command",
    "diff_configs",
    "fingerprint",
    "job_params",
    "json_text",
    "key_prefix",
    "load_config_values",
    "namespace_for",
    "redact",
    "redact_argv",
    "redact_name",
    "redact_text",
    "to_plain",
]
