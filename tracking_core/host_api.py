"""The host API: what a host adapter (``slime_integration``, ``verl_integration``, a third party's)
needs from tracking-core beyond the tracker contract (:mod:`tracking_core.plugin_api`) and the
user-facing API (``tracking_core.start_run``, ``attach``, ``Run``, ...).

- **The run handle** every process of a job finds its run by: :func:`find_handle`,
  :data:`RUN_ENV`, :data:`HANDLE_FILE`, and :data:`ARGS_ATTR` (where the handle rides on the
  host's arguments object); :func:`job_run_id` (the run id a launcher's job identity gives).
- **Selecting and starting.** :func:`resolve_backend_names` (the backends a run would select),
  :data:`BACKENDS_ENV`, :func:`tracking_dir`, :func:`system_metrics_interval`, :mod:`settings`
  (every ``TRACKING_CORE_*`` variable is read there), :class:`HostRun` (a host's run for every
  role, the way the Accelerate and Lightning integrations hold it).
- **Getting into every process of a job**: the import hook (:class:`HostHook`,
  :class:`InstallModule`, :data:`BOOTSTRAP_DIR`).
- **Phases a host timed itself**: :func:`trace_span` (a span of the role's phase trace).
- **Saying things about a run**: :func:`where_to_look` (one line per tracker of a run),
  :func:`diff_command` (the command that compares two runs' configs), :func:`host_key` (the host
  name as series names use it), :func:`to_plain` (a host's config objects as plain values),
  :func:`path_part` and :func:`path_under` (a name as one path component / a relative path that
  stays inside its folder).

Importing this module is cheap: the config, the system metrics and the viewers are imported on
first use of the names that need them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import settings
from .handle import ARGS_ATTR, HANDLE_FILE, RUN_ENV, find_handle
from .integrations.host_run import HostRun
from .integrations.import_hook import BOOTSTRAP_DIR, HostHook, InstallModule
from .launchers import job_run_id
from .names import path_part, path_under
from .options import BACKENDS_ENV, system_metrics_interval, tracking_dir
from .selection import resolve_backend_names

if TYPE_CHECKING:
    from .config import diff_command, to_plain
    from .reduce import trace_span
    from .system_metrics import host_key
    from .viewers import where_to_look

#: Imported on first use: name -> module relative to this package.
_LAZY = {
    "diff_command": ".config",
    "to_plain": ".config",
    "host_key": ".system_metrics",
    "trace_span": ".reduce",
    "where_to_look": ".viewers",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tracking_core.host_api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, "tracking_core"), name)
    globals()[name] = value
    return value


__all__ = [
    "ARGS_ATTR",
    "BACKENDS_ENV",
    "BOOTSTRAP_DIR",
    "HANDLE_FILE",
    "RUN_ENV",
    "HostHook",
    "HostRun",
    "InstallModule",
    "diff_command",
    "find_handle",
    "host_key",
    "job_run_id",
    "path_part",
    "path_under",
    "resolve_backend_names",
    "settings",
    "system_metrics_interval",
    "to_plain",
    "trace_span",
    "tracking_dir",
    "where_to_look",
]
