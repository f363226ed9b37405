"""The key convention: which namespace a config goes to and how its keys are named.

DESIGN.md, "One writer per namespace": the launch config (role None) is the ``launch`` namespace
with unprefixed keys, written by the primary; each role's effective config is its own namespace
with flat ``<role>/<key>`` keys, written by that role's writer. Only top-level keys are prefixed:
a nested value stays one value (``actor/eval_datasets`` holds a list), as slime's ``critic/`` keys
do.

The ``slime`` key style reproduces slime's own keys for existing dashboards: the actor's effective
config unprefixed, the critic's under ``critic/``, other roles under ``<role>/``; the launch config
then goes only to its JSON artifact (``params`` empty), because the actor's writer owns the
unprefixed keys.
"""

from __future__ import annotations

from typing import Any

from ..records import ConfigSection
from .convert import to_plain
from .secrets import Redactor, default_redactor

__all__ = ["KEY_STYLES", "LAUNCH", "build_section", "key_prefix", "namespace_for"]

#: Key styles :func:`build_section` knows.
KEY_STYLES = ("default", "slime")
#: The namespace (and artifact name) of the launch config.
LAUNCH = "launch"


def _check_style(key_style: str) -> None:
    if key_style not in KEY_STYLES:
        raise ValueError(
            f"unknown config key style {key_style!r}; expected one of {', '.join(KEY_STYLES)} "
            "(--tracking-key-style / TRACKING_CORE_KEY_STYLE)"
        )


def _check_role(role: str | None) -> None:
    if role is None:
        return
    if not isinstance(role, str) or not role or role == LAUNCH:
        raise ValueError(
            f"invalid role {role!r}: a role is a non-empty name other than {LAUNCH!r} "
            "(use role=None for the launch config)"
        )


def namespace_for(role: str | None) -> str:
    """The namespace of a role's config: the role's name, or ``launch`` for the launch config."""
    _check_role(role)
    return LAUNCH if role is None else role


def key_prefix(role: str | None, key_style: str = "default") -> str:
    """The prefix of a namespace's parameter keys under ``key_style``."""
    _check_style(key_style)
    _check_role(role)
    if role is None:
        return ""
    if key_style == "slime" and role == "actor":
        return ""
    return f"{role}/"


def build_section(
    obj: Any,
    role: str | None,
    key_style: str = "default",
    redactor: Redactor | None = None,
) -> ConfigSection:
    """Run the whole pipeline on a host config: convert, redact, key by the convention.

    ``values`` is the complete converted and redacted namespace; ``params`` its top-level keys
    with the namespace's prefix (empty for the launch config in the ``slime`` style). ``report``
    is ``{"conversions": [...], "redacted": [...]}``, paths relative to ``values``; it never
    holds a secret. Conversion never raises; an unknown ``key_style`` or an invalid role does
    (``ValueError``), before anything is converted.
    """
    prefix = key_prefix(role, key_style)
    namespace = namespace_for(role)
    redactor = redactor or default_redactor()
    plain, conversions = to_plain(obj)
    values, redacted = redactor.redact(plain)
    if role is None and key_style == "slime":
        params: dict[str, Any] = {}
    else:
        params = {prefix + key: value for key, value in values.items()}
    report = {
        # A path is made of key names, and a key name can itself be secret-shaped.
        "conversions": [{**c.as_dict(), "path": redactor.redact_text(c.path)} for c in conversions],
        "redacted": list(redacted),
    }
    return ConfigSection(
        role=role,
        namespace=namespace,
        prefix=prefix,
        values=values,
        params=params,
        report=report,
    )
