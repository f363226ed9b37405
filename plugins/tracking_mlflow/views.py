"""What the MLflow plugin says about a run it holds: where it is, the MLflow UI that
``tracking-core ui`` starts on its store, its read-back for ``tracking-core show``, and the
experiment a host's project name selects.

Nothing here imports mlflow until a run is read back or located (``show``, ``ui`` without
``--dry-run``): the start line and ``ui --dry-run`` stay cheap.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from tracking_core.plugin_api import RunHandle, TrackerReport, Viewer, Views, runnable

from . import settings

NAME = "mlflow"
#: The run tag that names the job's run id: what makes the backend's ``open_run`` idempotent and
#: how a run is found by the job's id (the backend sets it on every run it creates).
RUN_ID_TAG = "tracking_core.run_id"


def _remote(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def run_page(base: str, entry: Mapping[str, Any]) -> str:
    """The MLflow UI at ``base``, on the run's metric charts when the entry names the run."""
    return settings.run_page(base, entry.get("experiment_id"), entry.get("run_id"))


class MlflowViews(Views):
    """A run on a tracking server or in a local store: its page, the MLflow UI, its read-back."""

    def location(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str] | None:
        """The run on its server (its page), or in a local store (the ``mlflow ui`` command)."""
        uri = str(entry.get("tracking_uri", ""))
        which = entry.get("run_id") or f"tagged {RUN_ID_TAG}={handle.run_id}"
        if _remote(uri):
            return [f"MLflow run {which}: {run_page(uri, entry)}"]
        return [f"MLflow run {which} in {uri}: {runnable('mlflow')} ui --backend-store-uri {uri}"]

    def viewer(self, entry: Mapping[str, Any], handle: RunHandle, host: str, port: int | None, dry_run: bool) -> Viewer | None:
        """The MLflow UI on the run's local store, opening the run's page; a server's own UI."""
        uri = str(entry.get("tracking_uri", ""))
        if _remote(uri):
            return Viewer(NAME, url=run_page(uri, entry), note="the MLflow server's own UI")
        entry, warning = (entry, "") if dry_run or entry.get("run_id") else _located(entry, handle.run_id)
        base = f"http://{host}:{port}"
        return Viewer(
            NAME,
            url=run_page(base, entry),
            command=[sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
                     "--host", host, "--port", str(port), "--workers", "1"],
            ready=f"{base}/health",
            note=f"MLflow UI on {uri}",
            env={"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},  # no job runner: starts in seconds
            warning=warning,
        )  # fmt: skip

    def read(self, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport | None:
        """The run's status, its number of params, the last value of every metric and its tables,
        histograms, texts and artifacts, read with ``MlflowClient`` on the recorded tracking URI."""
        uri = str(entry.get("tracking_uri") or "")
        report = TrackerReport(NAME, f"in {uri}")
        client, run = locate_run(entry, handle.run_id)
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
        _count_artifacts(report, client, run)
        return report

    def project_options(self, project: str) -> dict[str, str] | None:
        """The host's project is the MLflow experiment, unless ``$MLFLOW_EXPERIMENT_NAME`` or
        ``$MLFLOW_EXPERIMENT_ID`` names one."""
        if os.environ.get("MLFLOW_EXPERIMENT_NAME") or os.environ.get("MLFLOW_EXPERIMENT_ID"):
            return None
        return {"mlflow_experiment": project}


def _located(entry: Mapping[str, Any], run_id: str) -> tuple[Mapping[str, Any], str]:
    """The entry with the run's id, found by its tag where only the target was saved (a run
    opened by a delivery process); else the entry as it was and why (the UI then opens on the
    experiment list)."""
    try:
        _, found = locate_run(entry, run_id)
    except Exception as exc:  # noqa: BLE001 - the UI still opens, on the experiment list
        return entry, f"the MLflow run of {run_id} not found ({exc})"
    return {**entry, "run_id": found.info.run_id, "experiment_id": found.info.experiment_id}, ""


def locate_run(entry: Mapping[str, Any], run_id: str) -> tuple[Any, Any]:
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
        filter_string=f"tags.`{RUN_ID_TAG}` = {quote}{run_id}{quote}",
        max_results=1,
    )
    if not found:
        raise LookupError(
            f"no MLflow run tagged {RUN_ID_TAG}={run_id} in experiment {experiment_id} of {uri}"
        )
    return client, found[0]


def _count_artifacts(report: TrackerReport, client: Any, run: Any) -> None:
    """The run's tables, histograms and texts (one artifact file per record, in a folder per
    name) and its logged artifacts (one tag each: :data:`media.ARTIFACT_TAG`)."""
    from . import media

    for kind in (media.TABLES_DIR, media.HISTOGRAMS_DIR, media.TEXTS_DIR):
        folders = [kind]
        while folders:
            folder = folders.pop()
            for item in client.list_artifacts(run.info.run_id, folder):
                if item.is_dir:
                    folders.append(item.path)
                else:
                    report.count(kind, folder[len(kind) + 1:] or folder)
    for tag in run.data.tags:
        if tag.startswith(media.ARTIFACT_TAG):
            path = tag[len(media.ARTIFACT_TAG):]
            report.count(media.ARTIFACTS_DIR, path.removeprefix(media.ARTIFACTS_DIR + "/"))


