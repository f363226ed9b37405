"""What the SwanLab plugin says about a run it holds: the experiment online, the ``swanlab
watch`` command of a local run, or, offline, the ``swanlab sync`` commands that upload every
writer's directory into one experiment (start line, end of run); and the project a host's
project name selects.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from tracking_core.plugin_api import RunHandle, Views, runnable

from .options import _PROJECT_NAME, BANNER_NOTE, sync_commands

NAME = "swanlab"
log = logging.getLogger("tracking_core.swanlab")


def _offline_lines(entry: Mapping[str, Any]) -> list[str]:
    """One ``swanlab sync --id`` command per writer's directory, the primary's last, and why
    SwanLab's own banner is not the one to follow."""
    log_dir = entry.get("log_dir")
    commands = sync_commands(str(log_dir), str(entry.get("id"))) if log_dir else []
    head = f"SwanLab offline run {entry.get('id')} in {log_dir}: upload it with"
    tool = runnable("swanlab")
    return [head] + [f"  {tool}{c[len('swanlab'):]}" for c in commands] + [f"  ({BANNER_NOTE})"]


class SwanlabViews(Views):
    """An experiment online, a local run to watch, or offline runs to upload."""

    def location(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str] | None:
        mode = entry.get("mode")
        if mode == "online":
            return [f"SwanLab experiment {entry.get('id')}: {entry.get('url') or entry.get('project')}"]
        if mode == "local":
            return [f"SwanLab (local): {runnable('swanlab')} watch {entry.get('log_dir')}   (needs swanlab[dashboard])"]
        return _offline_lines(entry)

    def sync(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str] | None:
        """An offline run's ``swanlab sync`` commands."""
        if entry.get("mode") != "offline":
            return None
        return _offline_lines(entry)

    def project_options(self, project: str) -> dict[str, str] | None:
        """The host's project is the SwanLab project, unless ``$SWANLAB_PROJ_NAME`` (or
        ``$SWANLAB_PROJECT_NAME``) names one, or SwanLab would refuse the name (then SwanLab's own
        default project is used, as without a host project)."""
        if os.environ.get("SWANLAB_PROJ_NAME") or os.environ.get("SWANLAB_PROJECT_NAME"):
            return None
        if not _PROJECT_NAME.match(project):  # the rule resolve() holds --swanlab-project to
            log.info("the host's project %r is no SwanLab project name: SwanLab's default project is used", project)
            return None
        return {"swanlab_project": project}


