"""What the TensorBoard plugin says about a run it holds: its log directory and the
``tensorboard`` command, the TensorBoard that ``tracking-core ui`` starts on it, and its
read-back for ``tracking-core show`` (TensorBoard's own event reader, one run per role: its
scalars, histograms and texts).

tensorboard is imported only when a run is read back.
"""

from __future__ import annotations

import glob
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracking_core.plugin_api import RunHandle, TrackerReport, Viewer, Views, runnable

NAME = "tensorboard"


class TensorBoardViews(Views):
    """A log directory of event files, one TensorBoard run per role."""

    def location(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str] | None:
        return [f"TensorBoard: {runnable('tensorboard')} --logdir {entry.get('logdir')}"]

    def viewer(self, entry: Mapping[str, Any], handle: RunHandle, host: str, port: int | None, dry_run: bool) -> Viewer | None:
        """TensorBoard on the run's log directory."""
        logdir = str(entry.get("logdir"))
        base = f"http://{host}:{port}"
        return Viewer(
            NAME,
            url=f"{base}/",
            command=[sys.executable, "-m", "tensorboard.main", "--logdir", logdir,
                     "--host", host, "--port", str(port)],
            ready=f"{base}/",
            note=f"TensorBoard on {logdir}",
            env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        )  # fmt: skip

    def read(self, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport | None:
        """The last value of every scalar tag, per TensorBoard run (``actor: train/pg_loss``), and
        the histogram and text tags (tables and artifact notes are texts in TensorBoard)."""
        logdir = Path(str(entry.get("logdir") or ""))
        report = TrackerReport(NAME, str(logdir))
        if not logdir.is_dir():
            report.error = f"the log directory {logdir} does not exist (moved or deleted?)"
            return report
        runs = sorted(
            {Path(p).parent for p in glob.glob(str(logdir / "**" / "*.tfevents.*"), recursive=True)}
        )
        report.detail = f"TensorBoard runs: {', '.join(str(r.relative_to(logdir)) for r in runs)}"
        for run_dir in runs:
            sub = str(run_dir.relative_to(logdir))
            last, held = _read(str(run_dir))
            for tag, point in last.items():
                report.last[tag if sub == "." else f"{sub}: {tag}"] = point
            for kind, tags in held.items():
                for tag, count in tags.items():
                    report.count(kind, tag if sub == "." else f"{sub}: {tag}", count)
        return report


#: TensorBoard's plugins whose tags ``show`` counts besides the scalars, with the kind each holds
#: (tables and texts are both the text plugin's, artifacts are notes among the texts).
_KINDS = {"histograms": "histograms", "text": "texts"}


def _read(path: str) -> tuple[dict[str, tuple[float, int | None]], dict[str, dict[str, int]]]:
    """One TensorBoard run directory: the last value of every scalar tag, and the number of
    events of every histogram and text tag."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(path, size_guidance={"tensors": 0})
    acc.Reload()
    last: dict[str, tuple[float, int | None]] = {}
    held: dict[str, dict[str, int]] = {}
    for plugin, kind in (("scalars", ""), *_KINDS.items()):
        try:
            tags = sorted(acc.PluginTagToContent(plugin))
        except KeyError:  # no such summary in this run directory
            continue
        for tag in tags:
            events = acc.Tensors(tag)
            if kind:
                held.setdefault(kind, {})[tag] = len(events)
            elif events:
                point = max(events, key=lambda e: (e.step, e.wall_time))
                last[tag] = (float(tensor_util.make_ndarray(point.tensor_proto).item()), int(point.step))
    return last, held


