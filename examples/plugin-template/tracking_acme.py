"""The ``acme`` backend: a template for a tracking-core plugin.

It writes one JSON object per line to ``<tracking-dir>/acme/<run-id>/<process label>.jsonl``.
To wrap a real tracker, replace the file writes with its client calls, import the client inside
the methods (listing plugins must stay cheap), and name its import name in ``requires`` so
``tracking-core plugins`` and ``--tracking-backends acme`` say what to install when it is missing.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tracking_core
from tracking_core.plugin_api import (
    Backend,
    BackendRegistrar,
    ConfigSection,
    MetricRecord,
    RunContext,
    RunHandle,
    RunStatus,
    TrackerReport,
    Viewer,
    Views,
)


def target(run: RunContext) -> dict[str, str]:
    """Where the run goes, computed at start without connecting: kept in the run handle, given
    to ``open_run``, and what ``tracking-core sync`` replays to."""
    return {"dir": str((run.tracking_dir / "acme" / run.run_id).absolute())}


class AcmeBackend:
    """One instance per run in each writing process, called by one worker, one call at a time."""

    def __init__(self, run: RunContext) -> None:
        self.path: Path | None = None

    def _write(self, *objs: Mapping[str, Any]) -> None:
        assert self.path is not None, "open_run or attach_run comes first"
        with self.path.open("a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(o, sort_keys=True, default=str) + "\n" for o in objs)
            fh.flush()
            os.fsync(fh.fileno())

    def _start(self, where: Mapping[str, Any], run: RunContext) -> dict[str, str]:
        directory = Path(where["dir"])
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{run.label}.jsonl"
        return {"dir": str(directory)}

    @tracking_core.hookimpl
    def open_run(self, run: RunContext, target: Mapping[str, Any]) -> dict[str, str]:
        entry = self._start(target, run)  # returned: goes into the run handle
        self._write({"type": "open", "run_id": run.run_id, "name": run.name})
        return entry

    @tracking_core.hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> None:
        self._start(attach, run)
        self._write({"type": "attach", "role": run.role})

    @tracking_core.hookimpl
    def log_config(self, config: ConfigSection, role: str | None) -> None:
        self._write(
            {"type": "config", "namespace": config.namespace, "params": dict(config.params)}
        )

    @tracking_core.hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        # Returning acknowledges the batch; raising has the same records offered again.
        self._write(
            *({"type": "metric", "name": r.name, "value": r.value, "step": r.step} for r in records)
        )

    @tracking_core.hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        self._write({"type": "close", "status": status.value, "primary": run.primary})


class AcmeViews(Views):
    """What tracking-core says about an acme run; ``entry`` is what ``target`` or ``open_run``
    returned, as the run handle keeps it. Define only what your tracker has."""

    def location(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str]:
        """Where the run's data is (under the run's start line)."""
        return [f"acme: {entry['dir']}"]

    def sync(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str]:
        """How to upload what is kept only on this machine, said at the end of the run (None:
        nothing to upload, e.g. the run went to a server)."""
        return [f"acme: upload it with: acme-upload {entry['dir']}"]

    def viewer(self, entry: Mapping[str, Any], handle: RunHandle, host: str, port: int | None, dry_run: bool) -> Viewer:
        """What ``tracking-core ui`` starts (here Python's file server on the run's files), on the
        free port it picked from ``viewer_port``; ``ready`` answers once it is up."""
        return Viewer(
            "acme",
            url=f"http://{host}:{port}/",
            command=[sys.executable, "-m", "http.server", str(port), "--bind", host, "--directory", entry["dir"]],
            ready=f"http://{host}:{port}/",
            note=f"the acme files in {entry['dir']}",
        )

    def read(self, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport:
        """What ``tracking-core show`` prints: the run's status and the last value of each series,
        read the way your tracker reads them (here, the files)."""
        report = TrackerReport("acme", entry["dir"])
        for path in sorted(Path(entry["dir"]).glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines():
                obj = json.loads(line)
                if obj["type"] == "metric":  # a series is one writer's, in the order it logged
                    report.last[obj["name"]] = (float(obj["value"]), obj["step"])
                elif obj["type"] == "close" and obj["primary"]:
                    report.status = obj["status"]
        return report


@tracking_core.hookimpl
def register_backends(register: BackendRegistrar) -> None:
    register(
        Backend(
            "acme",
            "tracking_acme:AcmeBackend",
            target="tracking_acme:target",
            requires=[],  # import names your backend needs, e.g. ["acme_sdk"]
            description="JSON lines under <tracking-dir>/acme (the plugin template)",
            viewer_port=8765,  # the port `tracking-core ui` starts your viewer from
            views=AcmeViews(),
        )
    )
