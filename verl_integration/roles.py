"""verl's config, split the way verl organises it: the launch config and one namespace per role.

verl hands ``Tracking`` the whole resolved config of the job (``OmegaConf.to_container(config,
resolve=True)`` in ``RayPPOTrainer.fit``); each worker group then builds its own settings from one
section of it. So the role namespaces are those sections (:data:`ROLE_SECTIONS`): ``actor/`` from
``actor_rollout_ref.actor``, ``rollout/`` from ``actor_rollout_ref.rollout``, ``ref/`` from
``actor_rollout_ref.ref``, ``critic/`` from ``critic``, ``reward_model/`` from ``reward_model``.
The actor, the rollout and the reference policy share ``actor_rollout_ref.model``; it is part of
each of their effective settings, so it is added to each as ``model`` (the critic has its own
``critic.model``). A section that is absent, not a mapping, or switched off (``enable: false``)
gives no namespace.

Keys are the dotted paths a verl user writes as Hydra overrides: the launch config's
``actor_rollout_ref.actor.optim.lr`` is the actor's ``optim.lr`` (``actor/optim.lr`` as a
parameter) and the critic's ``critic/optim.lr``, so ``tracking-core diff RUN --roles actor
critic`` lines them up and every tracker shows one parameter per setting. Lists stay one value;
an empty mapping stays ``{}``. Pure functions; omegaconf is used only when the config is an
OmegaConf object.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tracking_core.host_api import to_plain

log = logging.getLogger("tracking_core.verl.roles")

__all__ = ["ROLE_SECTIONS", "SHARED_MODEL", "flatten", "launch_config", "plain_config", "role_configs"]

#: Role -> the path of its section in verl's config.
ROLE_SECTIONS: dict[str, tuple[str, ...]] = {
    "actor": ("actor_rollout_ref", "actor"),
    "rollout": ("actor_rollout_ref", "rollout"),
    "ref": ("actor_rollout_ref", "ref"),
    "critic": ("critic",),
    "reward_model": ("reward_model",),
}
#: The model section the roles of ``actor_rollout_ref`` share.
SHARED_MODEL: tuple[str, ...] = ("actor_rollout_ref", "model")


def plain_config(config: Any) -> dict[str, Any]:
    """``config`` (a dict, an OmegaConf ``DictConfig``, a dataclass ...) as plain, sorted data.

    An OmegaConf object is resolved first (as verl does); one whose interpolations cannot be
    resolved is taken unresolved, with a warning. Never raises.
    """
    if config is None:
        return {}
    values, _ = to_plain(_resolved(config))
    return dict(values)


def _resolved(config: Any) -> Any:
    """An OmegaConf object as a resolved container; anything else as it is."""
    try:
        from omegaconf import OmegaConf
    except ImportError:  # pragma: no cover - verl depends on omegaconf
        return config
    if not OmegaConf.is_config(config):
        return config
    try:
        return OmegaConf.to_container(config, resolve=True)
    except Exception as exc:  # noqa: BLE001 - an unresolvable interpolation
        log.warning("verl config: cannot resolve its interpolations (%s); logged unresolved", exc)
        return OmegaConf.to_container(config, resolve=False)


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys (``{"optim": {"lr": 1}}`` -> ``{"optim.lr": 1}``)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, path + "."))
        else:
            out[path] = value
    return out


def _section(values: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any] | None:
    node: Any = values
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, Mapping) else None


def role_configs(config: Any) -> dict[str, dict[str, Any]]:
    """Each role's section of verl's config (see the module docstring), flattened."""
    values = plain_config(config)
    model = _section(values, SHARED_MODEL)
    out: dict[str, dict[str, Any]] = {}
    for role, path in ROLE_SECTIONS.items():
        section = _section(values, path)
        if section is None or section.get("enable") is False:
            continue
        merged = dict(section)
        if path[0] == SHARED_MODEL[0] and model is not None and "model" not in merged:
            merged["model"] = dict(model)
        out[role] = flatten(merged)
    return out


def launch_config(config: Any) -> dict[str, Any]:
    """The whole config, flattened to dotted keys (``actor_rollout_ref.actor.optim.lr``)."""
    return flatten(plain_config(config))
