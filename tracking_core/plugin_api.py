"""The plugin API: what a tracker plugin needs from tracking-core, and nothing else.

A tracker plugin (``plugins/tracking_*``, a third-party ``tracking-acme``) imports its contract
from here. Host adapters import theirs from :mod:`tracking_core.host_api`. Optional helpers that
several built-in trackers share (the config as trackers store it, metrics as rows by step, one
run shared by several writers, safe file and path names) are not part of this contract: a plugin
that wants one imports it from the helper's own module (docs/hooks.md lists them). A test walks
the imports of the built-in plugins, the adapters and the plugin template and holds them to
these rules.

- **Hooks and registration.** :data:`hookimpl` marks hook implementations (the hooks are in
  :mod:`tracking_core.hookspecs` and on docs/hooks.md). ``register_backends(register)`` hands a
  :class:`BackendRegistrar`; call it with a :class:`Backend` (name, factory, what it requires,
  how its metrics are batched, its target, its :class:`Views`).
- **What a backend receives.** :class:`RunContext` (the run, its role and options),
  :class:`RunStatus`, :class:`ConfigSection`, and the records :class:`MetricRecord`,
  :class:`TableRecord` (cells of type :data:`Cell`), :class:`HistogramRecord`,
  :class:`TextRecord`, :class:`ArtifactRecord`; :class:`HostParser` is what ``add_options``
  gets.
- **What a tracker says about its runs.** A :class:`Views` subclass, given as
  ``Backend(views=...)``, answers about one :class:`RunHandle`'s entry: its location, how to
  sync it, its :class:`Viewer`, its read-back (a :class:`TrackerReport`), a run of its own files,
  the options a host's project sets; :func:`runnable` names a tool so that its command runs from
  any directory.
- **Errors.** :class:`TrackingError` (the base), :class:`RunNotOpenYet` (a secondary asked too
  early: it is retried).
"""

from __future__ import annotations

from . import hookimpl
from .context import RunContext
from .errors import RunNotOpenYet, TrackingError
from .handle import RunHandle
from .host_parser import HostParser
from .records import (
    ArtifactRecord,
    Cell,
    ConfigSection,
    HistogramRecord,
    MetricRecord,
    RunStatus,
    TableRecord,
    TextRecord,
)
from .registry import Backend, BackendRegistrar
from .views import TrackerReport, Viewer, Views, runnable

__all__ = [
    "ArtifactRecord",
    "Backend",
    "BackendRegistrar",
    "Cell",
    "ConfigSection",
    "HistogramRecord",
    "HostParser",
    "MetricRecord",
    "RunContext",
    "RunHandle",
    "RunNotOpenYet",
    "RunStatus",
    "TableRecord",
    "TextRecord",
    "TrackerReport",
    "TrackingError",
    "Viewer",
    "Views",
    "hookimpl",
    "runnable",
]
