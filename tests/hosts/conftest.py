"""Fixtures for the host adapters' tests (verl, Accelerate, Lightning): each host's real package,
a real ``mlflow server`` (the shared one of ``tests.helpers.mlflow_server``), TensorBoard
files read back with TensorBoard's reader, and a backend that raises on every call.

``hosts_env`` points tracking-core at a fresh tracking directory and the server, with the
backends selected the way a user of the host selects them (``$TRACKING_CORE_BACKENDS``). What is
tested here is the mapping of each host's interface onto a run; the delivery path behind it is
the same for every caller and has its own tests (tests/core, tests/faults), so these runs deliver
on a thread (``$TRACKING_CORE_DELIVERY=thread``): one process imports the trackers' clients once
instead of one delivery process per run importing them again.
``raising_backend`` registers, for one test, a plugin whose backend ``raising`` raises in every
hook (open, config, metrics, tables, close): a tracker that is down for the whole job.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import tracking_core
from tests.helpers.mlflow_server import MlflowServer
from tests.helpers.tb_events import TBRun, read_logdir


@dataclass
class HostsEnv:
    """Where one test's runs go."""

    tracking_dir: Path
    server: MlflowServer

    def client(self) -> Any:
        from mlflow.tracking import MlflowClient

        return MlflowClient(self.server.uri)


@pytest.fixture
def hosts_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlflow_server: MlflowServer
) -> HostsEnv:
    for name in ("MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID", "TENSORBOARD_DIR", "WANDB_PROJECT", "TRACKING_CORE_RUN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACKING_CORE_DIR", str(tmp_path / "tracking-runs"))
    monkeypatch.setenv("TRACKING_CORE_BACKENDS", "mlflow,tensorboard,jsonl")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    monkeypatch.setenv("TRACKING_CORE_DELIVERY", "thread")
    return HostsEnv(tmp_path / "tracking-runs", mlflow_server)


# -- reading a run back -------------------------------------------------------------------------
def mlflow_run_id(run: Any) -> str:
    """The MLflow run id of a finished tracking-core run (from its run handle)."""
    entry = run.handle.backends["mlflow"]
    assert "run_id" in entry, f"the MLflow backend never opened the run: {entry}"
    return str(entry["run_id"])


def mlflow_history(client: Any, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def mlflow_artifact_json(client: Any, run_id: str, path: str) -> dict[str, Any]:
    from mlflow.artifacts import download_artifacts

    local = download_artifacts(run_id=run_id, artifact_path=path, tracking_uri=client.tracking_uri)
    return json.loads(Path(local).read_text())  # type: ignore[no-any-return]


def tensorboard_runs(run: Any) -> dict[str, TBRun]:
    """Every TensorBoard run (role subdirectory) of a tracking-core run, read with TensorBoard."""
    return read_logdir(run.handle.backends["tensorboard"]["logdir"])


def jsonl_lines(run: Any, role: str = "primary") -> list[dict[str, Any]]:
    path = Path(run.handle.tracking_dir) / "jsonl" / run.run_id / f"{role}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def close_to(a: float, b: float) -> bool:
    """float32 on disk (TensorBoard) against the float the host computed."""
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


# -- a tracker that is down for the whole job ------------------------------------------------------
class RaisingBackend:
    """Every hook raises, as a tracker that rejects everything would."""

    calls: list[str] = []

    def __init__(self, run: Any) -> None:
        self.context = run

    def _fail(self, hook: str) -> None:
        RaisingBackend.calls.append(hook)
        raise RuntimeError(f"raising backend: {hook} refused")

    @tracking_core.hookimpl
    def open_run(self, run: Any, target: Any) -> None:
        self._fail("open_run")

    @tracking_core.hookimpl
    def attach_run(self, run: Any, attach: Any) -> None:
        self._fail("attach_run")

    @tracking_core.hookimpl
    def log_config(self, config: Any, role: Any) -> None:
        self._fail("log_config")

    @tracking_core.hookimpl
    def log_metrics(self, records: Any) -> None:
        self._fail("log_metrics")

    @tracking_core.hookimpl
    def log_table(self, table: Any) -> None:
        self._fail("log_table")

    @tracking_core.hookimpl
    def close_run(self, status: Any, run: Any) -> None:
        self._fail("close_run")


class RaisingPlugin:
    @tracking_core.hookimpl
    def register_backends(self, register: Any) -> None:
        from tracking_core.plugin_api import Backend
        register(Backend("raising", RaisingBackend, description="raises in every hook (tests)"))


@pytest.fixture
def raising_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[type[RaisingBackend]]:
    """Backends ``raising`` (every call raises) and ``jsonl`` (the witness that the host's
    records did reach tracking-core), selected by ``$TRACKING_CORE_BACKENDS``."""
    for name in ("MLFLOW_EXPERIMENT_NAME", "TENSORBOARD_DIR", "TRACKING_CORE_RUN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACKING_CORE_DIR", str(tmp_path / "tracking-runs"))
    monkeypatch.setenv("TRACKING_CORE_BACKENDS", "raising,jsonl")
    manager = tracking_core.get_plugin_manager()
    assert manager.register(RaisingPlugin(), "raising-test-plugin")
    RaisingBackend.calls = []
    try:
        yield RaisingBackend
    finally:
        manager.unregister("raising-test-plugin")
