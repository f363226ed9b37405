"""Named backends offered by plugins, and turning a selected name into a backend instance."""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import BackendUnavailable, UnknownBackend

log = logging.getLogger("tracking_core.registry")

BackendFactory = Callable[..., Any]


@dataclass(frozen=True)
class BackendSpec:
    """A backend a plugin offers: its name, how to build it and what it needs installed."""

    name: str
    factory: BackendFactory | str
    plugin: str
    requires: tuple[str, ...] = ()
    extra: str | None = None
    description: str = ""
    max_batch: int | None = None
    batch_interval: float | None = None

    def missing(self) -> list[str]:
        """Import names of ``requires`` that are not installed (checked without importing)."""
        out = []
        for module in self.requires:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                out.append(module)
        return out

    def resolve_factory(self) -> BackendFactory:
        if callable(self.factory):
            return self.factory
        module_name, _, attr = self.factory.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
        return obj


@dataclass
class BackendRegistrar:
    """The ``register`` callback handed to ``register_backends``; the host keeps the first
    registration of a name and reports later ones by plugin name."""

    specs: dict[str, BackendSpec] = field(default_factory=dict)
    plugin: str = "?"
    duplicates: list[tuple[str, str, str]] = field(default_factory=list)

    def __call__(
        self,
        name: str,
        factory: BackendFactory | str,
        *,
        requires: Sequence[str] = (),
        extra: str | None = None,
        description: str = "",
        max_batch: int | None = None,
        batch_interval: float | None = None,
    ) -> None:
        if not name or "," in name or name != name.strip():
            raise ValueError(
                f"plugin {self.plugin!r} registered an invalid backend name {name!r}: "
                "use a non-empty name without commas or surrounding spaces"
            )
        if name in self.specs:
            first = self.specs[name].plugin
            self.duplicates.append((name, first, self.plugin))
            log.warning(
                "backend %r is offered by both plugin %r and plugin %r; keeping %r's "
                "(disable one with TRACKING_CORE_DISABLE_PLUGINS)",
                name,
                first,
                self.plugin,
                first,
            )
            return
        self.specs[name] = BackendSpec(
            name=name,
            factory=factory,
            plugin=self.plugin,
            requires=tuple(requires),
            extra=extra,
            description=description,
            max_batch=max_batch,
            batch_interval=batch_interval,
        )


def check_selectable(specs: dict[str, BackendSpec], names: Sequence[str]) -> list[BackendSpec]:
    """The specs for ``names``, or a clear error naming what is unknown or missing."""
    out = []
    for name in names:
        spec = specs.get(name)
        if spec is None:
            raise UnknownBackend(name, sorted(specs))
        missing = spec.missing()
        if missing:
            raise BackendUnavailable(name, missing, spec.extra)
        out.append(spec)
    return out
