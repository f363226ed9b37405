"""What the TensorBoard plugin says about a run it holds: its log directory and the
``tensorboard`` command, the TensorBoard that ``tracking-core ui`` starts on it, and its
read-back for ``tracking-core show`` (TensorBoard's own event reader, one run per role).

tensorboard is imported only when a run is read back.
"""

from __future__ import annotations

import glob
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracking_core.plugin_api import RunHandle, TrackerReport, Viewer, hookimpl, runnable

NAME = "tensorboard"


@hookimpl
def tracker_location(backend: str, entry: Mapping[str, Any], handle: RunHandle) -> list[str] | None:
    if backend != NAME:
        return None
    return [f"TensorBoard: {runnable('tensorboard')} --logdir {entry.get('logdir')}"]


@hookimpl
def tracker_viewer(
    backend: str, entry: Mapping[str, Any], handle: RunHandle, host: str, port: int | None, dry_run: bool
) -> Viewer | None:
    """TensorBoard on the run's log directory."""
    if backend != NAME:
        return None
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


def _scalars(path: str) -> dict[str, tuple[float, int | None]]:
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(path, size_guidance={"tensors": 0})
    acc.Reload()
    try:
        tags = sorted(acc.PluginTagToContent("scalars"))
    except KeyError:  # no scalar in this run directory
        return {}
    out: dict[str, tuple[float, int | None]] = {}
    for tag in tags:
        events = acc.Tensors(tag)
        if events:
            last = max(events, key=lambda e: (e.step, e.wall_time))
            out[tag] = (float(tensor_util.make_ndarray(last.tensor_proto).item()), int(last.step))
    return out


@hookimpl
def read_tracker(backend: str, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport | None:
    """The last value of every scalar tag, per TensorBoard run (``actor: train/pg_loss``)."""
    if backend != NAME:
        return None
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
        for tag, point in _scalars(str(run_dir)).items():
            report.last[tag if sub == "." else f"{sub}: {tag}"] = point
    return report
