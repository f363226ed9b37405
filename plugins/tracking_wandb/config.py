"""A config section as ``wandb.config`` takes it. Standard library only (no ``wandb`` import).

W&B takes the flat prefixed keys (``actor/lr``) with their values as they are, nested values
included; the one thing it does not keep is a key whose value is an empty mapping, so those are
named (the section's lossless JSON, :func:`tracking_core.config.config_json`, has them).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tracking_core.config import artifact_path
from tracking_core.plugin_api import ConfigSection

__all__ = ["wandb_config"]

log = logging.getLogger("tracking_core.backends.wandb")


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
