"""Calling every collector for a role and merging what they return.

Merge order: the explicit config given to ``attach`` first, then each collector in plugin load
order (built-in plugins, then third-party ones in the order their entry points load, then plugins
registered at run time). A later source adds keys; a key two sources disagree on keeps the *later*
value and is reported — in a warning naming both plugins and in the config's report — never
overwritten silently. Equal values from two sources are not a conflict.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("tracking_core.collectors")


@dataclass
class Conflict:
    key: str
    first_plugin: str
    first_value: Any
    second_plugin: str
    second_value: Any

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kept": self.second_plugin,
            "plugins": [self.first_plugin, self.second_plugin],
            "values": [repr(self.first_value)[:200], repr(self.second_value)[:200]],
        }


@dataclass
class MergedConfig:
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - arrays and odd objects
        return a is b


def merge_collected(role: str, parts: Iterable[tuple[str, Any]]) -> MergedConfig:
    """Merge ``(source name, mapping)`` pairs in order; see the module docstring for the rules."""
    merged = MergedConfig()
    for source, part in parts:
        if part is None:
            continue
        if not isinstance(part, Mapping):
            log.warning(
                "collector %r returned %s for role %r instead of a mapping; ignored",
                source,
                type(part).__name__,
                role,
            )
            continue
        for key, value in part.items():
            key = str(key)
            if key in merged.values and not _same(merged.values[key], value):
                conflict = Conflict(key, merged.sources[key], merged.values[key], source, value)
                merged.conflicts.append(conflict)
                log.warning(
                    "collectors %r and %r disagree on %r for role %r (%r vs %r); keeping %r's "
                    "value (later in load order)",
                    conflict.first_plugin,
                    source,
                    key,
                    role,
                    conflict.first_value,
                    value,
                    source,
                )
            merged.values[key] = value
            merged.sources[key] = source
    return merged
