"""The writer registry holds at any size: 300 writers on other nodes, names at their length limit.

A real primary (this process) closes its run on a real ``mlflow server`` while 300 writers of
other hosts, each with a role name of 128 characters (the longest a role may be), a host name of
63 and one with a 4,000-character tracking directory, still owe data. Each writer publishes
through the real publisher and the MLflow plugin's real ``publish_writer`` hook, as a writer's
delivery does (one attached backend stands for them all: the server sees the same requests).

The summary names all 300, the run is FAILED with a count, a pointer and the first lines in
``tracking_core.incomplete``, each writer's line in a tag of its own, and every registry tag is
still JSON. The run gets its intended status back only when every writer named is complete: not
while one is left, and not when one's tag cannot be read.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import tracking_core
from tests.helpers.mlflow_server import MlflowServer, mlflow_server  # noqa: F401
from tracking_core.delivery.writers import Counts, Publisher, identity

WRITERS = 300
ROLE_BYTES = 128  # tracking_core.names.MAX_PART_BYTES: the longest role name
HOST = 63  # the longest host name label
TAG_LIMIT = 5000  # what a SQLite-backed server keeps of a tag value


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


def _writer(backend: Any, i: int, tmp_path: Path) -> Publisher:
    role = f"critic{i:03d}_" + "r" * (ROLE_BYTES - 10)
    host = f"node{i:03d}-" + "h" * (HOST - 8)
    folder = tmp_path / ("d" * 4000 if i == 0 else f"node{i:03d}") / "tracking"
    who = identity(
        label=f"{role}-r0-p{10000 + i}", role=role, rank=0, pid=10000 + i, tracking_dir=str(folder), host=host
    )
    return Publisher(who, lambda state: bool(backend.publish_writer(state=state) or True), live=True)


def _tags(uri: str, run_id: str) -> dict[str, str]:
    return dict(_client(uri).get_run(run_id).data.tags)


@pytest.mark.slow
def test_300_writers_with_the_longest_names_are_all_named_and_the_verdict_holds(
    mlflow_server: MlflowServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tracking_mlflow.backend import MlflowBackend

    uri = mlflow_server.uri
    for name in ("TRACKING_CORE_RUN", "TRACKING_CORE_BACKENDS", "TRACKING_CORE_RUN_ID", "TRACKING_CORE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRACKING_CORE_WRITER_HEARTBEAT", "1")
    monkeypatch.chdir(tmp_path)
    run = tracking_core.start_run(
        backends=["mlflow"],
        tracking_dir=tmp_path / "node0",
        options={"mlflow_tracking_uri": uri, "mlflow_experiment": "registry-size"},
        export=False,
    )
    run.log_metrics({"reward": 1.0}, step=0)
    assert run.flush(timeout=60)
    entry = dict(run.handle.backends["mlflow"])
    run_id = entry["run_id"]

    context = tracking_core.RunContext(
        backend="mlflow", run_id=run.run_id, name="writers", primary=False, role="critic", tracking_dir=tmp_path
    )
    backend = MlflowBackend(context)
    backend.attach_run(context, entry)
    writers = [_writer(backend, i, tmp_path) for i in range(WRITERS)]
    for publisher in writers:
        publisher.opened(Counts(10, 4, 0, time.time() - 30))  # then silent: their nodes are lost
    labels = [str(p.who["label"]) for p in writers]
    assert all(len(label) >= ROLE_BYTES for label in labels)

    summary = run.finish(timeout=60)
    assert sorted(summary.writers) == sorted(labels), len(summary.writers)
    text = summary.describe()
    assert f"{WRITERS} other writer(s) of the job still owe data" in text
    assert all(label in text for label in labels)

    tags = _tags(uri, run_id)
    assert _client(uri).get_run(run_id).info.status == "FAILED"
    assert tags["tracking_core.intended_status"] == "FINISHED"
    incomplete = tags["tracking_core.incomplete"]
    assert len(incomplete) <= TAG_LIMIT and incomplete.startswith(f"{WRITERS} writer(s)"), incomplete[:200]
    assert "tracking_core.owing." in incomplete and labels[0] in incomplete
    lines = {k: v for k, v in tags.items() if k.startswith("tracking_core.owing.")}
    assert len(lines) == WRITERS
    assert sorted(label for label in labels if any(label in line for line in lines.values())) == sorted(labels)
    registry = {k: v for k, v in tags.items() if k.startswith("tracking_core.writer.")}
    assert len(registry) == WRITERS + 1
    assert all(len(value) <= TAG_LIMIT for value in registry.values())
    states = {s["label"]: s for s in map(json.loads, registry.values())}  # every one is JSON
    assert states[run.label]["state"] == "complete" and states[run.label]["incomplete"] == WRITERS
    assert "tracking_dir" in states[labels[0]] and len(states[labels[0]]["tracking_dir"]) < 4000

    for publisher in writers[:-2]:  # all but two complete: the run stays FAILED
        publisher.closed(Counts(10, 10, 0, time.time()), complete=True)
    assert _client(uri).get_run(run_id).info.status == "FAILED"
    assert len([k for k in _tags(uri, run_id) if k.startswith("tracking_core.owing.")]) == 2

    # A writer's tag that cannot be read (cut) never turns FAILED back into FINISHED.
    cut, last = writers[-2], writers[-1]
    key = next(k for k, v in registry.items() if json.loads(v)["label"] == cut.who["label"])
    _client(uri).set_tag(run_id, key, json.dumps({**cut.state("complete", Counts(10, 10, 0, 0.0))})[:300])
    last.closed(Counts(10, 10, 0, time.time()), complete=True)
    tags = _tags(uri, run_id)
    assert _client(uri).get_run(run_id).info.status == "FAILED" and "tracking_core.incomplete" in tags
    assert len([k for k in tags if k.startswith("tracking_core.owing.")]) == 1

    cut.closed(Counts(10, 10, 0, time.time()), complete=True)  # its sync, say
    tags = _tags(uri, run_id)
    assert _client(uri).get_run(run_id).info.status == "FINISHED"
    assert "tracking_core.incomplete" not in tags
    assert not [k for k in tags if k.startswith("tracking_core.owing.")]
