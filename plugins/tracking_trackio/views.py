"""What the trackio plugin says about a run it holds: its project and the ``trackio show``
command that opens it, its read-back for ``tracking-core show`` (trackio's own
``SQLiteStorage`` on the run's database: series, tables, histograms, texts), and the project a host's project name selects.

trackio is imported only when a run is read back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracking_core.plugin_api import RunHandle, TrackerReport, Views

from .options import project_file, show_command

NAME = "trackio"


class TrackioViews(Views):
    """A run in a trackio project, in its local store."""

    def location(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str] | None:
        return [f"trackio project {entry.get('project')}: {show_command(entry)}"]

    def read(self, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport | None:
        """The run's status (kept in its config), the last value and step of every series, and its
        tables, histograms and texts by name."""
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
                if isinstance(value, Mapping) and value.get("_type") in _KINDS:
                    report.count(_KINDS[str(value["_type"])], key)
                if key in ("step", "timestamp") or not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                current = report.last.get(key)
                if current is None or step is None or current[1] is None or int(step) >= current[1]:
                    report.last[key] = (float(value), None if step is None else int(step))
        return report

    def project_options(self, project: str) -> dict[str, str] | None:
        """The host's project is the trackio project, unless ``$TRACKIO_PROJECT`` names one."""
        return None if os.environ.get("TRACKIO_PROJECT") else {"trackio_project": project}


#: trackio's value types of the rich kinds, as ``show`` names them (an artifact's note is a text).
_KINDS = {"trackio.table": "tables", "trackio.histogram": "histograms", "trackio.markdown": "texts"}


