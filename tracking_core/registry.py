"""Named backends offered by plugins, and turning a selected name into a backend instance.

A plugin describes each backend it offers as data, a :class:`Backend` (name, factory, what it
requires, how its metrics are batched, where its run goes, its :class:`~tracking_core.views.Views`),
and hands it to the ``register`` callback of ``register_backends``. The host keeps it as a
:class:`BackendSpec`: the same fields plus the plugin (and distribution) that offered it.

A backend may also declare its **target** (``Backend(..., target="module:function")``): where
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
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import BackendUnavailable, UnknownBackend
from .views import Views

log = logging.getLogger("tracking_core.registry")


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
class Backend:
    """A backend a plugin offers, as ``register_backends`` hands it to ``register(...)``.

    ``factory`` is a callable, or a ``"module:attribute"`` string imported only when the backend
    is selected, that takes a :class:`~tracking_core.context.RunContext` and returns the backend
    instance. ``requires`` lists the import names the backend needs and ``extra`` the
    distribution extra that installs them, so selecting a backend whose library is missing says
    what to install. ``max_batch`` caps the records per ``log_metrics`` call (default 1000);
    ``batch_interval`` makes the worker deliver at most that often (seconds) unless a full batch
    is waiting or the run flushes, for trackers whose every call has a large fixed cost.

    ``target``, when declared, computes where this backend's run goes from the run's options and
    environment: ``target(run: RunContext) -> dict``, JSON-serialisable, never a credential
    (URIs without ``user:password@``). It runs in the training process when a run starts, so it
    must not import the tracker library nor connect anywhere. The primary's ``open_run`` gets the
    dict back as its ``target`` argument and opens the run there. ``terminal=True`` says the
    backend writes to the training process's terminal (its stderr). ``viewer_port``: the port
    the tracker's local viewer prefers (``tracking-core ui`` gives it a free one from there and a
    ``--<name>-port`` option). ``default_rank``: the backend may be the embedded default, used
    when nothing selects a backend; of the installed ones, the highest rank is chosen.
    ``views``: what the core says about the backend's runs (:class:`~tracking_core.views.Views`).

    Every field after ``factory`` has a default, so a field added later is a keyword with a
    default that existing plugins need not know about.
    """

    name: str
    factory: Callable[..., Any] | str
    requires: Sequence[str] = ()
    extra: str | None = None
    description: str = ""
    max_batch: int | None = None
    batch_interval: float | None = None
    target: Callable[..., Mapping[str, Any]] | str | None = None
    terminal: bool = False
    viewer_port: int | None = None
    default_rank: int | None = None
    views: Views = Views()

    def __post_init__(self) -> None:
        what = f"Backend({self.name!r})"
        if not isinstance(self.name, str) or not self.name or "," in self.name or self.name != self.name.strip():
            raise ValueError(
                f"invalid backend name {self.name!r}: use a non-empty name without commas or "
                "surrounding spaces"
            )
        if not (callable(self.factory) or _is_reference(self.factory)):
            raise TypeError(
                f"{what}: factory must be a callable or a 'module:attribute' string, "
                f"not {self.factory!r}"
            )
        if isinstance(self.requires, str):
            raise TypeError(
                f"{what}: requires is a sequence of import names: write "
                f"requires=({self.requires!r},), not requires={self.requires!r}"
            )
        object.__setattr__(self, "requires", tuple(self.requires))
        if not all(isinstance(module, str) and module for module in self.requires):
            raise TypeError(f"{what}: requires holds import names (strings), got {self.requires!r}")
        if self.max_batch is not None and (
            isinstance(self.max_batch, bool) or not isinstance(self.max_batch, int) or self.max_batch < 1
        ):
            raise ValueError(f"{what}: max_batch={self.max_batch!r}: give a whole number of records, 1 or more")
        if self.batch_interval is not None and (
            isinstance(self.batch_interval, bool)
            or not isinstance(self.batch_interval, int | float)
            or self.batch_interval < 0
        ):
            raise ValueError(f"{what}: batch_interval={self.batch_interval!r}: give seconds, 0 or more")
        if self.target is not None and not (callable(self.target) or _is_reference(self.target)):
            raise TypeError(
                f"{what}: target must be a callable or a 'module:attribute' string, not {self.target!r}"
            )
        if not isinstance(self.views, Views):
            raise TypeError(f"{what}: views must be a tracking_core.plugin_api.Views, not {self.views!r}")


def _is_reference(ref: object) -> bool:
    """Whether ``ref`` is a ``"module:attribute"`` string (the attribute may be dotted)."""
    if not isinstance(ref, str):
        return False
    module, colon, attr = ref.partition(":")
    return bool(colon and module.strip() and attr.strip()) and ref == ref.strip()


@dataclass(frozen=True)
class BackendSpec(Backend):
    """A registered :class:`Backend` as the host keeps it: every field the plugin gave, plus the
    plugin that registered it and that plugin's distribution."""

    plugin: str = "?"
    #: The distribution of the plugin that registered it (``tracking-core`` for the built-ins):
    #: the one whose ``extra`` installs what the backend ``requires``.
    distribution: str | None = None

    @classmethod
    def of(cls, backend: Backend, plugin: str, distribution: str | None = None) -> BackendSpec:
        """``backend`` as registered by ``plugin`` (every field of :class:`Backend` carried over)."""
        given = {f.name: getattr(backend, f.name) for f in fields(Backend)}
        return cls(**given, plugin=plugin, distribution=distribution)

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

    def resolve_factory(self) -> Callable[..., Any]:
        """The factory (a ``"module:attribute"`` string is imported now)."""
        return _resolve(self.factory)

    def resolve_target(self) -> Callable[..., Mapping[str, Any]] | None:
        """The target function, or None when the backend declares none."""
        return None if self.target is None else _resolve(self.target)


@dataclass
class BackendRegistrar:
    """The ``register`` callback handed to ``register_backends``: ``register(Backend(...))``.

    The host keeps the first registration of a name and reports later ones by plugin name.
    """

    specs: dict[str, BackendSpec] = field(default_factory=dict)
    plugin: str = "?"
    distribution: str | None = None
    duplicates: list[tuple[str, str, str]] = field(default_factory=list)

    def __call__(self, backend: Backend) -> None:
        """Keep ``backend`` under its name, unless an earlier plugin registered that name."""
        if not isinstance(backend, Backend):
            raise TypeError(
                f"plugin {self.plugin!r}: register() takes a Backend(name, factory, ...), not {backend!r}"
            )
        name = backend.name
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
        self.specs[name] = BackendSpec.of(backend, self.plugin, self.distribution)


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
