"""The plugin API: everything a tracker plugin or a host adapter imports from tracking-core.

A plugin (``plugins/tracking_*``, a third-party ``tracking-acme``) or a host adapter
(``slime_integration``, ``verl_integration``) imports from this module only, plus the
user-facing API of the package itself (``tracking_core.start_run``, ``attach``, ``Run``,
``NullRun``, ``get_plugin_manager``, ``add_tracking_options``: the names in
``tracking_core.__all__`` that are not offered here). Every other ``tracking_core`` module is
internal and may change between releases; a test walks the imports of the built-in plugins, the
adapters and the plugin template and holds them to this rule.

What is here, by use:

- **Hooks.** :data:`hookimpl` marks hook implementations (the hooks are in
  :mod:`tracking_core.hookspecs` and on docs/hooks.md).
- **Registration.** ``register_backends(register)`` hands a :class:`BackendRegistrar`; call it
  with a :class:`Backend` (name, factory, ``requires``/``extra``, ``description``, ``target``,
  ``terminal``) whose :class:`Delivery` says how its metric rows are batched.
- **What a backend receives.** :class:`RunContext` (the run, its role and options),
  :class:`RunStatus`, :class:`ConfigSection`, and the records :class:`MetricRecord`,
  :class:`TableRecord` (cells of type :data:`Cell`), :class:`HistogramRecord`,
  :class:`TextRecord`, :class:`ArtifactRecord`.
- **Options.** :class:`HostParser` (what ``add_options`` gets); :func:`tracking_option_dests`
  (the destinations that are plumbing, not config); :func:`tracking_dir`,
  :func:`system_metrics_interval`; :data:`BACKENDS_ENV` and :mod:`settings` (every
  ``TRACKING_CORE_*`` variable is read there).
- **Errors a plugin may raise or catch.** :class:`TrackingError` (the base),
  :class:`RunNotOpenYet` (a secondary asked too early: it is retried), :class:`BackendUnavailable`,
  :class:`UnknownBackend`.
- **Config helpers.** :func:`config_json`, :func:`config_text`, :func:`json_text` (the config as
  every tracker stores it), :func:`artifact_path` (where the config artifact goes),
  :func:`job_params` (a section without the tracking options), :func:`redact_argv` (a command line
  without its secrets), :data:`LAUNCH` (the launch section's role), :func:`is_volatile` (keys that
  differ between launches), :func:`to_plain` (a host's config objects as plain values),
  :func:`diff_command` (the command that compares two runs' configs).
- **Files and names.** :func:`replace_text` (write a file atomically), :func:`path_part` and
  :func:`path_under` (a name as one path component / a relative path that stays inside its
  folder), :func:`runnable` (a tool installed beside this Python as a command that runs from any
  directory), :func:`host_key` (the host name as series names use it).
- **One run, several writers; metrics as rows.** :class:`SharedRuns` (a tracker's runs open in
  this process, ended by their last user with the primary's status), :func:`saved_role_sections`
  (the roles' config the primary folds in); :func:`metric_rows` (records as ``log`` calls by step
  axis, :class:`Row`; a record's axis: :func:`axis_of`), :class:`AxisDefinitions` (metric ->
  axis, told once; :func:`new_definitions`), :class:`RowRetry` (a failed batch's retry logs no
  row twice). See :mod:`tracking_core.shared_run`, :mod:`tracking_core.rows`.
- **What a tracker says about a run** (the hooks ``tracker_viewer`` and ``read_tracker``):
  :class:`Viewer` (what ``tracking-core ui`` starts, the URL to open) and :class:`TrackerReport`
  (what ``tracking-core show`` prints of a backend's data).
- **For host adapters.** The run handle (:class:`RunHandle`, :func:`find_handle`,
  :data:`RUN_ENV`, :data:`HANDLE_FILE`, :data:`ARGS_ATTR`), :func:`job_run_id` (the run id a
  launcher's job identity gives), :func:`resolve_backend_names` (the backends a run would
  select), :class:`HostRun` (a host's run for every role), :func:`where_to_look` (one line per
  tracker of a run), and the import hook that puts an adapter in every process of a job
  (:class:`HostHook`, :class:`InstallModule`, :data:`BOOTSTRAP_DIR`).

Importing this module is as cheap as importing ``tracking_core``: the config helpers and the
adapters' helpers are imported on first use (a plugin's ``__init__`` that lists its backends stays
cheap, and modules that import plugins can be imported by them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import hookimpl, settings
from .context import RunContext
from .errors import BackendUnavailable, RunNotOpenYet, TrackingError, UnknownBackend
from .files import replace_text
from .handle import ARGS_ATTR, HANDLE_FILE, RUN_ENV, RunHandle, find_handle
from .names import path_part, path_under
from .options import (
    BACKENDS_ENV,
    HostParser,
    system_metrics_interval,
    tracking_dir,
    tracking_option_dests,
)
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
from .registry import Backend, BackendRegistrar, Delivery
from .rows import AxisDefinitions, Row, RowRetry, axis_of, metric_rows, new_definitions
from .shared_run import SharedRun, SharedRuns, saved_role_sections

if TYPE_CHECKING:
    from .config import (
        LAUNCH,
        artifact_path,
        config_json,
        config_text,
        diff_command,
        job_params,
        json_text,
        redact_argv,
        to_plain,
    )
    from .config.diff import is_volatile
    from .integrations.host_run import HostRun
    from .integrations.import_hook import BOOTSTRAP_DIR, HostHook, InstallModule
    from .launchers import job_run_id
    from .readback import TrackerReport
    from .selection import resolve_backend_names
    from .system_metrics import host_key
    from .viewers import Viewer, runnable, where_to_look

#: Imported on first use (see the module docstring): name -> module relative to this package.
_LAZY = {
    "LAUNCH": ".config",
    "artifact_path": ".config",
    "config_json": ".config",
    "config_text": ".config",
    "diff_command": ".config",
    "job_params": ".config",
    "json_text": ".config",
    "redact_argv": ".config",
    "to_plain": ".config",
    "is_volatile": ".config.diff",
    "HostRun": ".integrations.host_run",
    "BOOTSTRAP_DIR": ".integrations.import_hook",
    "HostHook": ".integrations.import_hook",
    "InstallModule": ".integrations.import_hook",
    "job_run_id": ".launchers",
    "TrackerReport": ".readback",
    "resolve_backend_names": ".selection",
    "host_key": ".system_metrics",
    "runnable": ".viewers",
    "where_to_look": ".viewers",
    "Viewer": ".viewers",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tracking_core.plugin_api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, "tracking_core"), name)
    globals()[name] = value
    return value


__all__ = [
    "ARGS_ATTR",
    "BACKENDS_ENV",
    "BOOTSTRAP_DIR",
    "HANDLE_FILE",
    "LAUNCH",
    "RUN_ENV",
    "ArtifactRecord",
    "Backend",
    "BackendRegistrar",
    "BackendUnavailable",
    "Cell",
    "ConfigSection",
    "Delivery",
    "HistogramRecord",
    "HostHook",
    "HostParser",
    "HostRun",
    "InstallModule",
    "MetricRecord",
    "RunContext",
    "RunHandle",
    "RunNotOpenYet",
    "RunStatus",
    "TableRecord",
    "TextRecord",
    "TrackerReport",
    "TrackingError",
    "UnknownBackend",
    "Viewer",
    "artifact_path",
    "config_json",
    "config_text",
    "diff_command",
    "find_handle",
    "hookimpl",
    "host_key",
    "is_volatile",
    "job_params",
    "job_run_id",
    "json_text",
    "path_part",
    "path_under",
    "redact_argv",
    "replace_text",
    "resolve_backend_names",
    "runnable",
    "settings",
    "system_metrics_interval",
    "to_plain",
    "tracking_dir",
    "tracking_option_dests",
    "where_to_look",
    # one run written by several writers, metrics as rows by step (tracking_core.rows, .shared_run)
    "AxisDefinitions", "Row", "RowRetry", "SharedRun", "SharedRuns", "axis_of", "metric_rows", "new_definitions",
    "saved_role_sections",
]
