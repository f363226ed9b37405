"""Named backends offered by plugins, and turning a selected name into a backend instance.

A backend may also declare its **target** (``register(..., target="module:function")``): where
its run goes, computed in the training process when a run starts, before (and without) any
connection to the tracker, so that the run handle says where each backend's run is even while the
backend has not opened it yet.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from .errors import BackendUnavailable, UnknownBackend

log = logging.getLogger("tracking_core.registry")

BackendFactory = Callable[..., Any]
#: ``target(run: RunContext) -> dict``: where the backend's run goes (see :class:`BackendSpec`).
BackendTarget = Callable[..., Mapping[str, Any]]


def _resolve(ref: Any) -> Any:
    """A callable as given, or the object a ``"module:attribute"`` string names (imported now)."""
    if callable(ref):
        return ref
    module_name, _, attr = str(ref).partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class BackendSpec:
    """A backend a plugin offers: its name, how to build it and what it needs installed.

    ``target``, when declared, computes where this backend's run goes from the run's options and
    environment: ``target(run: RunContext) -> dict``, JSON-serialisable, never a credential
    (URIs without ``user:password@``). It runs in the training process when a run starts, so it
    must not import the tracker library nor connect anywhere. The primary's ``open_run`` gets the
    dict back as its ``target`` argument and opens the run there.
    """

    name: str
    factory: BackendFactory | str
    plugin: str
    requires: tuple[str, ...] = ()
    extra: str | None = None
    description: str = ""
    max_batch: int | None = None
    batch_interval: float | None = None
    target: BackendTarget | str | None = None
    terminal: bool = False
    #: The distribution of the plugin that registered it (``tracking-core`` for the built-ins):
    #: the one whose ``extra`` installs what the backend ``requires``.
    distribution: str | None = None

    def install_command(self, missing: Sequence[str]) -> str:
        """What to run to install ``missing`` (import names of ``requires``): the plugin's own
        distribution with its extra, ``pip install "tracking-core[tensorboard]"``, followed by
        the packages that extra installs where the distribution's metadata says; without an
        extra, the import names as packages."""
        if not self.extra:
            return f"pip install {' '.join(missing)}"
        distribution = self.distribution or "tracking-core"
        command = f'pip install "{distribution}[{self.extra}]"'
        packages = extra_requirements(distribution, self.extra)
        return f"{command} (it installs {', '.join(packages)})" if packages else command

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
        """The factory (a ``"module:attribute"`` string is imported now)."""
        return cast(BackendFactory, _resolve(self.factory))

    def resolve_target(self) -> BackendTarget | None:
        """The target function, or None when the backend declares none."""
        if self.target is None:
            return None
        return cast(BackendTarget, _resolve(self.target))


@dataclass
class BackendRegistrar:
    """The ``register`` callback handed to ``register_backends``; the host keeps the first
    registration of a name and reports later ones by plugin name."""

    specs: dict[str, BackendSpec] = field(default_factory=dict)
    plugin: str = "?"
    distribution: str | None = None
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
        target: BackendTarget | str | None = None,
        terminal: bool = False,
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
            target=target,
            terminal=terminal,
            distribution=self.distribution,
        )


_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def extra_requirements(distribution: str, extra: str) -> list[str]:
    """The requirements ``distribution[extra]`` adds (``tensorboardX>=2.6``, ...), read from the
    installed distribution's metadata; empty when it is not installed or names none."""
    from importlib import metadata

    try:
        requires = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return []
    out = []
    for line in requires:
        requirement, _, marker = line.partition(";")
        if extra in _EXTRA_MARKER.findall(marker):
            out.append(requirement.strip())
    return out


def check_selectable(specs: dict[str, BackendSpec], names: Sequence[str]) -> list[BackendSpec]:
    """The specs for ``names``, or a clear error naming what is unknown or missing."""
    out = []
    for name in names:
        spec = specs.get(name)
        if spec is None:
            raise UnknownBackend(name, sorted(specs))
        missing = spec.missing()
        if missing:
            raise BackendUnavailable(name, missing, spec.extra, spec.install_command(missing))
        out.append(spec)
    return out
