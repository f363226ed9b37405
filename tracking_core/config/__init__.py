"""The config pipeline: host config -> plain data -> redacted -> keyed -> shaped per backend.

Pure functions, no tracker library imported (at import time or when called), so every step can be
tested against the trackers' own rules and run on the training process without cost surprises.

* :mod:`.convert` — :func:`to_plain`: any host object to sorted JSON data, with a
  :class:`Conversion` for everything lossy.
* :mod:`.secrets` — :class:`Redactor`, :func:`redact`, :func:`redact_text`, :func:`redact_argv`.
* :mod:`.keys` — :func:`build_section`: the whole pipeline, keyed by the namespace convention.
* :mod:`.shaping` — :func:`mlflow_params`, :func:`mlflow_key`, :func:`wandb_config`,
  :func:`tensorboard_hparams`, :func:`config_text`, :func:`config_json`.
* :mod:`.diff` — :func:`diff_configs` and the ``tracking-core diff`` command.
"""

from __future__ import annotations

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
    redact_text,
)
from .shaping import (
    MlflowKeyShaper,
    MlflowParams,
    artifact_path,
    config_json,
    config_text,
    mlflow_key,
    mlflow_params,
    param_text,
    shape_mlflow_keys,
    tensorboard_hparams,
    wandb_config,
)

__all__ = [
    "KEY_STYLES",
    "LAUNCH",
    "Change",
    "ConfigDiff",
    "Conversion",
    "MlflowKeyShaper",
    "MlflowParams",
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
    "key_prefix",
    "load_config_values",
    "mlflow_key",
    "mlflow_params",
    "namespace_for",
    "param_text",
    "redact",
    "redact_argv",
    "redact_text",
    "shape_mlflow_keys",
    "tensorboard_hparams",
    "to_plain",
    "wandb_config",
]
