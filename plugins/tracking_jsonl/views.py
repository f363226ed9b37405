"""What the jsonl plugin says about a run it holds: its directory, ``tracking-core show`` as its
viewer, its read-back (the files as written), and ``show`` of a jsonl run directory that has no
saved run handle (copied, or from before run handles were saved).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracking_core.plugin_api import RunHandle, TrackerReport, Viewer, Views, runnable

from .reader import find_run, read_run

NAME = "jsonl"


class JsonlViews(Views):
    """jsonl's files: read back by ``tracking-core show``, with or without a saved run handle."""

    def location(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str] | None:
        return [f"jsonl: {entry.get('dir')}"]

    def viewer(self, entry: Mapping[str, Any], handle: RunHandle, host: str, port: int | None, dry_run: bool) -> Viewer | None:
        """Its files are read by ``tracking-core show``: nothing to start."""
        return Viewer(NAME, note=f"{runnable('tracking-core')} show {handle.run_dir}")

    def read(self, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport | None:
        """The run's status, the last value (the highest step's) of every series, and its tables,
        histograms, texts and artifacts by name."""
        path = Path(str(entry.get("dir") or ""))
        report = TrackerReport(NAME, str(path))
        if not path.is_dir():
            report.error = f"{path} does not exist (moved or deleted?)"
            return report
        run = read_run(path)
        report.status = run.status
        report.detail = f"files: {', '.join(run.files)}"
        for metric in run.metrics:
            name, step = str(metric["name"]), metric.get("step")
            current = report.last.get(name)
            if current is None or (step is not None and (current[1] is None or step >= current[1])):
                report.last[name] = (float(metric["value"]), None if step is None else int(step))
        for (kind, name), count in run.records.items():
            report.count(f"{kind}s", name, count)
        return report

    def show_files(self, run: str, tracking_dir: str, limit: int) -> list[str] | None:
        """A jsonl run directory (or a run id under ``<tracking_dir>/jsonl``): its status, each
        namespace's parameters, the number of values of every series and of the records of every
        table, histogram, text and artifact."""
        try:
            path = find_run(run, tracking_dir)
        except FileNotFoundError:
            return None
        found = read_run(Path(path))
        lines = [f"jsonl run {found.path.name} ({found.path})  status: {found.status or 'open'}"]
        for namespace, section in sorted(found.configs.items()):
            params = section.get("params") or {}
            values = section.get("values") or {}
            lines.append(f"\n[{namespace}] {len(values)} config keys ({len(params)} as parameters)")
            lines += [f"  {key} = {_value(params[key])}" for key in sorted(params)[:limit]]
            if len(params) > limit:
                lines.append(f"  ... {len(params) - limit} more (--limit)")
        counts = found.metric_counts()
        lines.append(f"\nmetrics: {sum(counts.values())} values in {len(counts)} series")
        lines += [f"  {name}: {count}" for name, count in sorted(counts.items())]
        for kind in ("table", "histogram", "text", "artifact"):
            held = {name: n for (k, name), n in found.records.items() if k == kind}
            if held:
                lines.append(f"\n{kind}s: {sum(held.values())} in {len(held)} name(s)")
                lines += [f"  {name}: {n}" for name, n in sorted(held.items())]
        return lines


def _value(value: object, width: int = 120) -> str:
    return json.dumps(value, default=str)[:width]


