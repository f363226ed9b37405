"""What the trackio plugin says about a run it holds: its project and the ``trackio show``
command that opens it, its read-back for ``tracking-core show`` (trackio's own
``SQLiteStorage`` on the run's database), and the project a host's project name selects.

trackio is imported only when a run is read back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracking_core.plugin_api import RunHandle, TrackerReport, hookimpl

from .options import project_file, show_command

NAME = "trackio"


@hookimpl
def tracker_location(backend: str, entry: Mapping[str, Any], handle: RunHandle) -> list[str] | None:
    if backend != NAME:
        return None
    return [f"trackio project {entry.get('project')}: {show_command(entry)}"]


@hookimpl
def read_tracker(backend: str, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport | None:
    """The run's status (kept in its config) and the last value and step of every series."""
    if backend != NAME:
        return None
    from .backend import STATUS_KEY, load_storage

    directory, project = Path(str(entry.get("dir") or "")), str(entry.get("project") or "")
    run_id = str(entry.get("run_id") or handle.run_id)
    database = directory / project_file(project)
    report = TrackerReport(NAME, f"run {entry.get('run')} ({run_id}) in project {project}, {database}")
    if not database.is_file():
        report.error = f"trackio's database {database} does not exist (moved or deleted?)"
        return report
    storage = load_storage(directory)  # trackio's own reader, on the run's data directory
    config = storage.get_run_config(project, run_id=run_id) or {}
    report.status = str(config[STATUS_KEY]) if config.get(STATUS_KEY) else None
    rows = storage.get_logs(project, run_id=run_id)
    report.detail = f"{len(rows)} rows; open it with: {show_command(entry)}"
    for row in rows:  # in the order trackio stored them: a later row at the same step wins
        step = row.get("step")
        for key, value in row.items():
            if key in ("step", "timestamp") or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            current = report.last.get(key)
            if current is None or step is None or current[1] is None or int(step) >= current[1]:
                report.last[key] = (float(value), None if step is None else int(step))
    return report


@hookimpl
def project_options(project: str) -> dict[str, str] | None:
    """The host's project is the trackio project, unless ``$TRACKIO_PROJECT`` names one."""
    return None if os.environ.get("TRACKIO_PROJECT") else {"trackio_project": project}
