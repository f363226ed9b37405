"""Reading a run back from where it was logged: ``tracking-core show RUN``.

A run is found by its saved handle (:mod:`tracking_core.saved_runs`), which names every tracker
of the run and where its data went. The configs of every namespace are read from the run
directory (tracking-core keeps each one losslessly there, whatever the trackers), and each
tracker that has a local reader is asked what it holds — with the tracker's own client: MLflow's
``MlflowClient`` on the recorded tracking URI, TensorBoard's event accumulator on the log
directory, ``wandb leet inspect`` on W&B's offline files, trackio's ``SQLiteStorage`` on its
local database, the jsonl files as written — so what is shown is what that tracker will show. A tracker that cannot be read (library missing, server
down) is reported on its line; the others are still read.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .handle import RunHandle

__all__ = ["TrackerReport", "locate_mlflow_run", "read_configs", "read_trackers"]

#: Seconds a tracker's reader may take before its line says it timed out.
READ_TIMEOUT = 60.0


@dataclass
class TrackerReport:
    """What one tracker holds of the run. ``last`` maps a series to its last ``(value, step)``
    (``step`` None where the tracker keeps no step with the value); ``error`` says why the
    tracker could not be read, when it could not."""

    tracker: str
    where: str
    status: str | None = None
    detail: str = ""
    last: dict[str, tuple[float, int | None]] = field(default_factory=dict)
    error: str | None = None


def read_configs(handle: RunHandle) -> dict[str, dict[str, Any]]:
    """Each namespace's saved config (``launch``, ``actor``, ...): its ``values`` as logged."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((handle.run_dir / "config").glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("values"), dict):
            out[str(doc.get("namespace") or path.stem)] = doc["values"]
    return out


#: The MLflow run tag that names the job's run id (set by the mlflow backend on every run).
MLFLOW_RUN_ID_TAG = "tracking_core.run_id"


def locate_mlflow_run(entry: Mapping[str, Any], run_id: str) -> tuple[Any, Any]:
    """``(client, run)``: the MLflow run of the job, by the run id in its handle entry, or —
    where the handle still holds only the target (the run was opened by a delivery process) —
    by the tag ``tracking_core.run_id`` in the entry's experiment. Raises LookupError when the
    store has no such run, and MLflow's own errors when the store cannot be reached."""
    # A dead server must not hold the caller for MLflow's default four minutes of retries.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    from mlflow.tracking import MlflowClient

    uri = str(entry.get("tracking_uri") or "")
    client = MlflowClient(tracking_uri=uri)
    if entry.get("run_id"):
        return client, client.get_run(str(entry["run_id"]))
    experiment_id = entry.get("experiment_id")
    if not experiment_id:
        name = str(entry.get("experiment") or "tracking-core")
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise LookupError(f"no MLflow experiment {name!r} in {uri}")
        experiment_id = experiment.experiment_id
    quote = '"' if "'" in run_id else "'"
    found = client.search_runs(
        [str(experiment_id)],
        filter_string=f"tags.`{MLFLOW_RUN_ID_TAG}` = {quote}{run_id}{quote}",
        max_results=1,
    )
    if not found:
        raise LookupError(
            f"no MLflow run tagged {MLFLOW_RUN_ID_TAG}={run_id} in experiment {experiment_id} of {uri}"
        )
    return client, found[0]


# -- one reader per tracker ------------------------------------------------------------------
def _read_mlflow(entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport:
    uri = str(entry.get("tracking_uri") or "")
    report = TrackerReport("mlflow", f"in {uri}")
    client, run = locate_mlflow_run(entry, handle.run_id)
    report.where = f"run {run.info.run_id} in {uri}"
    report.status = run.info.status
    report.detail = (
        f"experiment {entry.get('experiment') or run.info.experiment_id}, "
        f"{len(run.data.params)} params"
    )
    for key in sorted(run.data.metrics):
        history = client.get_metric_history(run.info.run_id, key)
        if history:
            point = max(history, key=lambda m: (m.step, m.timestamp))
            report.last[key] = (float(point.value), int(point.step))
    return report


def _tb_scalars(path: str) -> dict[str, tuple[float, int | None]]:
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


def _read_tensorboard(entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport:
    logdir = Path(str(entry.get("logdir") or ""))
    report = TrackerReport("tensorboard", str(logdir))
    if not logdir.is_dir():
        report.error = f"the log directory {logdir} does not exist (moved or deleted?)"
        return report
    runs = sorted(
        {Path(p).parent for p in glob.glob(str(logdir / "**" / "*.tfevents.*"), recursive=True)}
    )
    report.detail = f"TensorBoard runs: {', '.join(str(r.relative_to(logdir)) for r in runs)}"
    for run_dir in runs:
        sub = str(run_dir.relative_to(logdir))
        for tag, point in _tb_scalars(str(run_dir)).items():
            report.last[tag if sub == "." else f"{sub}: {tag}"] = point
    return report


def _inspect_wandb(path: str) -> dict[str, Any]:
    wandb_cli = Path(sys.executable).parent / "wandb"
    command = [str(wandb_cli)] if wandb_cli.exists() else [sys.executable, "-m", "wandb"]
    done = subprocess.run(
        [*command, "leet", "inspect", "--summary", "--json", path],
        capture_output=True, text=True, timeout=READ_TIMEOUT, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"wandb leet inspect {path} exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return dict(json.loads(done.stdout))


def _read_wandb(entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport:
    if entry.get("mode") != "offline":
        return TrackerReport(
            "wandb",
            f"run {entry.get('id')} in project {entry.get('project')} (online: read it in W&B)",
        )
    base = Path(str(entry.get("dir") or ".")) / "wandb"
    files = sorted(glob.glob(str(base / f"offline-run-*-{entry.get('id')}*" / "run-*.wandb")))
    report = TrackerReport("wandb", f"offline run {entry.get('id')} under {base}")
    if not files:
        report.error = f"no offline run directory of {entry.get('id')} under {base}"
        return report
    report.detail = f"{len(files)} offline run director{'y' if len(files) == 1 else 'ies'} (one per writing process)"
    with ThreadPoolExecutor(max_workers=4) as pool:
        folded = list(pool.map(_inspect_wandb, files))
    states = sorted({str(f.get("state")) for f in folded})
    report.status = ", ".join(states)
    for run in folded:
        for key, value in sorted((run.get("summary") or {}).items()):
            if not key.startswith("_") and isinstance(value, (int, float)) and not isinstance(value, bool):
                report.last[key] = (float(value), None)
    return report


def _read_jsonl(entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport:
    from tracking_jsonl.reader import read_run

    path = Path(str(entry.get("dir") or ""))
    report = TrackerReport("jsonl", str(path))
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
    return report


def _read_trackio(entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport:
    from tracking_trackio.backend import STATUS_KEY, load_storage
    from tracking_trackio.options import project_file, show_command

    directory, project = Path(str(entry.get("dir") or "")), str(entry.get("project") or "")
    run_id = str(entry.get("run_id") or handle.run_id)
    database = directory / project_file(project)
    report = TrackerReport("trackio", f"run {entry.get('run')} ({run_id}) in project {project}, {database}")
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


#: Trackers with a local reader; any other tracker is listed with where its data went.
READERS: dict[str, Callable[[Mapping[str, Any], RunHandle], TrackerReport]] = {
    "mlflow": _read_mlflow,
    "tensorboard": _read_tensorboard,
    "wandb": _read_wandb,
    "jsonl": _read_jsonl,
    "trackio": _read_trackio,
}


def _install_command(tracker: str, exc: ImportError) -> str:
    """What installs the reader of ``tracker``: the extra of the plugin that offers it (the
    packages named), else the missing module as a package."""
    from .plugins import get_plugin_manager

    missing = [exc.name] if exc.name else []
    spec = get_plugin_manager().backends.get(tracker)
    if spec is not None and spec.extra:
        return spec.install_command(missing)
    return f"pip install {' '.join(missing) or tracker}"


def _read_one(name: str, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport:
    reader = READERS.get(name)
    if reader is None:
        return TrackerReport(name, json.dumps(dict(entry), sort_keys=True, default=str), detail="no local reader")
    try:
        return reader(entry, handle)
    except ImportError as exc:
        where = json.dumps(dict(entry), sort_keys=True, default=str)
        return TrackerReport(name, where, error=f"{exc}; to read it here: {_install_command(name, exc)}")
    except Exception as exc:  # noqa: BLE001 - one tracker's failure is its own line
        where = json.dumps(dict(entry), sort_keys=True, default=str)
        return TrackerReport(name, where, error=f"{type(exc).__name__}: {str(exc)[:300]}")


def read_trackers(handle: RunHandle) -> list[TrackerReport]:
    """A report from every tracker of the run, in the handle's order (read concurrently)."""
    items = list(handle.backends.items())
    with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        futures = [pool.submit(_read_one, name, entry, handle) for name, entry in items]
        return [f.result() for f in futures]
