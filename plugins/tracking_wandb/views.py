"""What the W&B plugin says about a run it holds: the run and its project, or, offline, the
``wandb sync`` command that uploads every writer's directory of it (start line, end of run,
``tracking-core ui``); its read-back for ``tracking-core show`` (``wandb leet inspect`` on the
offline files); and the project a host's project name selects.

Nothing here imports wandb: the offline files are read by W&B's own command.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tracking_core.plugin_api import RunHandle, TrackerReport, Viewer, Views, runnable

NAME = "wandb"
#: Seconds ``wandb leet inspect`` may take on one offline directory.
READ_TIMEOUT = 60.0

#: Offline W&B keeps one directory per writing process on the disk of the node it ran on.
_OTHER_NODES = (
    "and on every other node that ran a writer of the job, in its own tracking directory "
    "($TRACKING_CORE_DIR there, else ./tracking-runs of the writer's working directory):"
)


def sync_command(entry: Mapping[str, Any]) -> str:
    """The ``wandb sync`` command for an offline W&B run (every process's directory of it).

    Offline, each writing process keeps its own directory under the same run id (see the W&B
    backend); ``wandb sync`` given several directories of one run id uploads them one after
    another in order of their start time, whatever order they are named in, so one glob that
    matches them all is the whole instruction.
    """
    base = Path(str(entry.get("dir") or ".")) / "wandb"
    return f"{runnable('wandb')} sync {base}/offline-run-*-{entry.get('id')}*"


def _sync_lines(entry: Mapping[str, Any], handle: RunHandle) -> list[str]:
    on_host = f" (on {handle.host})" if getattr(handle, "host", "") else ""
    return [
        f"W&B offline run {entry.get('id')}: upload it with {sync_command(entry)}{on_host}",
        f"  {_OTHER_NODES} {sync_command({**entry, 'dir': '$TRACKING_CORE_DIR'})}",
    ]


class WandbViews(Views):
    """A W&B run online, or offline directories to upload."""

    def location(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str] | None:
        if entry.get("mode") == "offline":
            return _sync_lines(entry, handle)
        return [f"W&B run {entry.get('id')} in project {entry.get('project')}"]

    def sync(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str] | None:
        """An offline run's ``wandb sync`` commands, this node's and every other node's."""
        if entry.get("mode") != "offline":
            return None
        return _sync_lines(entry, handle)

    def viewer(self, entry: Mapping[str, Any], handle: RunHandle, host: str, port: int | None, dry_run: bool) -> Viewer | None:
        """Nothing starts here: W&B shows the run (once an offline run is uploaded)."""
        if entry.get("mode") == "offline":
            return Viewer(NAME, note=f"offline: upload it with {sync_command(entry)}, then open it in W&B")
        return Viewer(NAME, note=f"run {entry.get('id')} in W&B project {entry.get('project')}")

    def read(self, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport | None:
        """An offline run's state and summary (its last values, and the tables, histograms and
        texts it holds, one each: the summary keeps the last), from every writer's directory of it;
        an online run is only named (W&B shows it)."""
        if entry.get("mode") != "offline":
            return TrackerReport(
                NAME, f"run {entry.get('id')} in project {entry.get('project')} (online: read it in W&B)"
            )
        base = Path(str(entry.get("dir") or ".")) / "wandb"
        files = sorted(glob.glob(str(base / f"offline-run-*-{entry.get('id')}*" / "run-*.wandb")))
        report = TrackerReport(NAME, f"offline run {entry.get('id')} under {base}")
        if not files:
            report.error = f"no offline run directory of {entry.get('id')} under {base}"
            return report
        report.detail = (
            f"{len(files)} offline run director{'y' if len(files) == 1 else 'ies'} (one per writing "
            "process); of each table, histogram and text, its summary holds the last"
        )
        with ThreadPoolExecutor(max_workers=4) as pool:
            folded = list(pool.map(_inspect, files))
        report.status = ", ".join(sorted({str(f.get("state")) for f in folded}))
        for run in folded:
            for key, value in sorted((run.get("summary") or {}).items()):
                if key.startswith("_"):
                    continue
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    report.last[key] = (float(value), None)
                elif isinstance(value, Mapping) and value.get("_type"):
                    # the summary holds a rich value's last record: its kind, not its count
                    report.count(_KINDS.get(str(value["_type"]), str(value["_type"])), key)
        return report

    def project_options(self, project: str) -> dict[str, str] | None:
        """The host's project is the W&B project, unless ``$WANDB_PROJECT`` names one."""
        return None if os.environ.get("WANDB_PROJECT") else {"wandb_project": project}


def _inspect(path: str) -> dict[str, Any]:
    wandb_cli = Path(sys.executable).parent / "wandb"
    command = [str(wandb_cli)] if wandb_cli.exists() else [sys.executable, "-m", "wandb"]
    done = subprocess.run(
        [*command, "leet", "inspect", "--summary", "--json", path],
        capture_output=True, text=True, timeout=READ_TIMEOUT, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"wandb leet inspect {path} exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return dict(json.loads(done.stdout))


#: W&B's summary types of the rich kinds, as ``show`` names them.
_KINDS = {"table-file": "tables", "table": "tables", "histogram": "histograms", "html-file": "texts"}


