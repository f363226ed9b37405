"""The job's writer registry: the primary knows every writer of the job, on every node.

Two kinds of tests. The hooks' own tests run a real backend whose registry is this process's
memory (registered at run time, so it delivers on threads of this process): what a writer
publishes, and what a finishing primary makes of the states it reads (a writer on another host
that went silent, one that owes data until the bound, one that completes while the primary
waits, a backend whose registry raises). The MLflow tests run a primary in this process and a
writer on a simulated other node (its own hostname, tracking directory, working directory and
processes; the MLflow server the only store they share): a healthy writer, and one lost with
its delivery process while its route to MLflow was held, whose leftovers ``tracking-core sync``
on that node delivers later, exactly once, setting the run's intended status back. A node whose
clock runs 300 s or 2 s ahead or behind (libfaketime) is judged as one on time, cut off after
catching up or healthy; a host name and a tracking directory with a token's shape reach no tag.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tracking_core
from tests.helpers.mlflow_server import MlflowServer, mlflow_server  # noqa: F401
from tests.helpers.nodes import Link, SimulatedNode, simulated_nodes  # noqa: F401
from tests.helpers.subprocess_python import JOBS
from tracking_core.plugins import get_plugin_manager
from tracking_core.records import RunStatus
from tracking_core.views import sync_command


class Registry:
    """A backend whose writer registry is this process's memory (a class attribute: every
    instance of one test shares it, as every node shares a tracking server)."""

    states: dict[str, dict[str, Any]] = {}
    published: list[dict[str, Any]] = []
    closes: list[tuple[str, bool]] = []
    values: list[tuple[str, int | None, float]] = []
    publish_raises = False
    read_raises = False

    def __init__(self, run: tracking_core.RunContext) -> None:
        self.context = run

    @tracking_core.hookimpl
    def open_run(self, run: tracking_core.RunContext) -> dict[str, Any]:
        return {"store": "memory"}

    @tracking_core.hookimpl
    def attach_run(self, run: tracking_core.RunContext, attach: dict[str, Any]) -> None:
        return None

    @tracking_core.hookimpl
    def log_metrics(self, records: list[tracking_core.MetricRecord]) -> None:
        Registry.values.extend((r.name, r.step, r.value) for r in records)

    @tracking_core.hookimpl
    def close_run(self, status: RunStatus, run: tracking_core.RunContext) -> None:
        Registry.closes.append((RunStatus(status).value, run.primary))

    @tracking_core.hookimpl
    def publish_writer(self, state: dict[str, Any]) -> None:
        if Registry.publish_raises:
            raise ConnectionError("the registry is unreachable")
        Registry.published.append(dict(state))
        Registry.states[str(state["label"])] = dict(state)

    @tracking_core.hookimpl
    def read_writers(self) -> dict[str, dict[str, Any]]:
        if Registry.read_raises:
            raise ConnectionError("the registry is unreachable")
        return {label: dict(state) for label, state in Registry.states.items()}


class RegistryPlugin:
    @tracking_core.hookimpl
    def register_backends(self, register: Any) -> None:
        from tracking_core.plugin_api import Backend
        register(Backend("registry", Registry, description="a writer registry in memory"))


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Registry]]:
    for name in ("TRACKING_CORE_RUN", "TRACKING_CORE_BACKENDS", "TRACKING_CORE_RUN_ID", "TRACKING_CORE_WRITER_HEARTBEAT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    Registry.states, Registry.published, Registry.closes, Registry.values = {}, [], [], []
    Registry.publish_raises = Registry.read_raises = False
    manager = get_plugin_manager()
    manager.register(RegistryPlugin(), "registry-plugin")
    try:
        yield Registry
    finally:
        manager.unregister("registry-plugin")


def _of(label: str) -> list[dict[str, Any]]:
    return [s for s in Registry.published if s["label"] == label]


def _remote(label: str = "critic-r0-p99", **fields: Any) -> dict[str, Any]:
    """A writer on another host, as its own delivery would have published it."""
    state = {
        "label": label,
        "role": "critic",
        "rank": 0,
        "host": "node9",
        "pid": 99,
        "state": "writing",
        "journaled": 7,
        "delivered": 3,
        "rejected": 0,
        "at": time.time(),
        "beat": 5.0,
        "tracking_dir": "/data/node9/tracking",
        "sync": "tracking-core sync /data/node9/tracking",
    }
    state.update(fields)
    return state


def test_hook_publish_writer(registry: type[Registry], tmp_path: Path) -> None:
    """Each writer says it writes once the run is open, then complete with its counts."""
    run = tracking_core.start_run(backends=["registry"], tracking_dir=tmp_path / "td")
    child = tracking_core.attach(role="actor", writer=True, collect=False)
    for step in range(5):
        child.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
    assert child.finish().drained
    summary = run.finish()
    assert summary.drained and summary.writers == {}
    actor = _of(child.label)
    assert actor[0]["state"] == "writing" and actor[-1]["state"] == "complete"
    last = actor[-1]
    assert (last["journaled"], last["delivered"], last["rejected"]) == (5, 5, 0)
    assert (last["role"], last["rank"], last["host"], last["pid"]) == ("actor", 0, socket.gethostname(), os.getpid())
    assert last["tracking_dir"] == str(child.tracking_dir)
    assert last["sync"] == sync_command(str(child.tracking_dir))
    assert last["beat"] == 5.0 and last["at"] <= time.time() and 0 <= last["behind"] < 5
    assert [state["seq"] for state in actor] == list(range(1, len(actor) + 1))
    primary = _of(run.label)
    assert primary[0]["state"] == "writing" and primary[-1]["state"] == "complete"
    assert primary[-1]["role"] is None and "incomplete" not in primary[-1]
    assert Registry.closes == [("FINISHED", False), ("FINISHED", True)]


def test_hook_read_writers(registry: type[Registry], tmp_path: Path) -> None:
    """A writer on another host that went silent (a node that died) is named: who, what, the
    command for its host; the run is closed FAILED with the status meant kept, once the
    primary's own clock saw no publication for three of its heartbeats (whatever its ``at``)."""
    run = tracking_core.start_run(backends=["registry"], tracking_dir=tmp_path / "td")
    run.log_metrics({"reward": 1.0}, step=0)
    Registry.states["critic-r0-p99"] = _remote(at=time.time() - 60, beat=1.0)
    started = time.monotonic()
    summary = run.finish(timeout=20)
    took = time.monotonic() - started
    assert 5 <= took < 9, took
    assert not summary.drained and summary.status is RunStatus.FINISHED
    (entry,) = summary.writers.values()
    assert (entry["role"], entry["rank"], entry["host"], entry["owed"]) == ("critic", 0, "node9", 4)
    assert entry["sync"] == "tracking-core sync /data/node9/tracking" and 5 <= entry["last_heard"] < 9
    text = summary.describe()
    assert "critic rank 0 on host node9" in text and "run on node9: tracking-core sync /data/node9/tracking" in text
    assert "marked FAILED in registry (meant FINISHED)" in text and f"last heard over {entry['last_heard']:.0f} s ago" in text
    assert Registry.closes == [("FAILED", True)]
    final = _of(run.label)[-1]
    assert final["intended_status"] == "FINISHED" and list(final["incomplete"]) == ["critic-r0-p99"]
    assert "node9" in final["incomplete"]["critic-r0-p99"]


def test_a_writer_still_owing_data_is_waited_for_within_the_finish_timeout(registry: type[Registry], tmp_path: Path) -> None:
    """A writer on another host that still heartbeats but is behind is waited for, bounded by the
    primary's finish timeout (keeping a reserve for the close), then named."""
    run = tracking_core.start_run(backends=["registry"], tracking_dir=tmp_path / "td")
    Registry.states["critic-r0-p99"] = _remote()
    started = time.monotonic()
    summary = run.finish(timeout=4)
    took = time.monotonic() - started
    assert 2.5 <= took <= 5.0, took
    assert list(summary.writers) == ["critic-r0-p99"] and Registry.closes == [("FAILED", True)]


def test_a_writer_that_completes_while_the_primary_waits_is_not_named(registry: type[Registry], tmp_path: Path) -> None:
    """The primary stops waiting as soon as the writer is complete (a caught-up heartbeat made
    before the primary began to close counts for nothing)."""
    run = tracking_core.start_run(backends=["registry"], tracking_dir=tmp_path / "td")
    Registry.states["critic-r0-p99"] = _remote(journaled=7, delivered=7)  # caught up, but before the close

    def completes() -> None:
        time.sleep(1.5)
        Registry.states["critic-r0-p99"] = _remote(state="complete", journaled=9, delivered=9)

    threading.Thread(target=completes, daemon=True).start()
    started = time.monotonic()
    summary = run.finish(timeout=20)
    took = time.monotonic() - started
    assert 1.4 <= took < 5, took
    assert summary.writers == {} and summary.drained and Registry.closes == [("FINISHED", True)]


def test_a_writer_that_goes_on_logging_is_waited_for_only_up_to_the_close(registry: type[Registry], tmp_path: Path) -> None:
    """A writer on another host that logs on (a node's system sampler) is never caught up; once
    it has delivered everything it logged before the primary began to close, it owes nothing."""
    run = tracking_core.start_run(backends=["registry"], tracking_dir=tmp_path / "td")
    Registry.states["system-r0-p97"] = _remote("system-r0-p97", role="system", journaled=50, delivered=40, behind=5.0)

    def heartbeat() -> None:
        time.sleep(1.5)  # delivered, by its own clock, everything it logged up to 0.2 s before
        Registry.states["system-r0-p97"] = _remote("system-r0-p97", role="system", journaled=90, delivered=80, behind=0.2)

    threading.Thread(target=heartbeat, daemon=True).start()
    started = time.monotonic()
    summary = run.finish(timeout=20)
    took = time.monotonic() - started
    assert 1.4 <= took < 5, took
    assert summary.writers == {} and Registry.closes == [("FINISHED", True)]


@pytest.mark.parametrize("skew", [300.0, 2.0])
def test_a_writer_caught_up_before_the_close_and_silent_since_is_named_whatever_its_clock(
    registry: type[Registry], tmp_path: Path, skew: float
) -> None:
    """A writer whose clock runs ahead published that it had caught up, then nothing (its node
    was cut off after journaling more): that publication came before the close, so it proves
    nothing; its silence on the primary's clock names it."""
    run = tracking_core.start_run(backends=["registry"], tracking_dir=tmp_path / "td")
    Registry.states["critic-r0-p99"] = _remote(journaled=3, delivered=3, at=time.time() + skew, behind=0.1, beat=1.0)
    summary = run.finish(timeout=20)
    assert list(summary.writers) == ["critic-r0-p99"] and Registry.closes == [("FAILED", True)]


@pytest.mark.parametrize("skew", [300.0, 2.0])
def test_a_live_writer_whose_clock_runs_behind_is_not_taken_for_silent(
    registry: type[Registry], tmp_path: Path, skew: float
) -> None:
    """A healthy writer heartbeating with a clock far behind the primary's is waited for as
    any other: its next caught-up heartbeat (made after the close began) lets the run finish."""
    run = tracking_core.start_run(backends=["registry"], tracking_dir=tmp_path / "td")
    Registry.states["critic-r0-p99"] = _remote(journaled=3, delivered=3, at=time.time() - skew, behind=0.1, beat=1.0)
    stop = threading.Event()

    def heartbeats() -> None:
        seq = 1
        while not stop.wait(0.5):
            seq += 1
            Registry.states["critic-r0-p99"] = _remote(
                journaled=3, delivered=3, at=time.time() - skew, behind=0.1, beat=1.0, seq=seq
            )

    threading.Thread(target=heartbeats, daemon=True).start()
    try:
        summary = run.finish(timeout=20)
    finally:
        stop.set()
    assert summary.writers == {} and Registry.closes == [("FINISHED", True)], summary.describe()


def test_a_run_meant_to_fail_is_not_held_up_but_names_who_owes(registry: type[Registry], tmp_path: Path) -> None:
    run = tracking_core.start_run(backends=["registry"], tracking_dir=tmp_path / "td")
    Registry.states["critic-r0-p99"] = _remote()
    started = time.monotonic()
    summary = run.finish(timeout=20, status="KILLED")
    assert time.monotonic() - started < 3
    assert list(summary.writers) == ["critic-r0-p99"] and Registry.closes == [("KILLED", True)]
    assert _of(run.label)[-1]["intended_status"] == "KILLED"


def test_writers_of_this_host_and_directory_are_left_to_the_finish_itself(registry: type[Registry], tmp_path: Path) -> None:
    """A writer whose journal lies in the primary's own tracking directory on its own host was
    waited for or replayed by the finish already: no second wait, and no verdict from a stale
    heartbeat (a single-node finish is not slower)."""
    run = tracking_core.start_run(backends=["registry"], tracking_dir=tmp_path / "td")
    Registry.states["actor-r0-p98"] = _remote(
        "actor-r0-p98", host=socket.gethostname(), tracking_dir=str(run.tracking_dir), at=time.time() - 2
    )
    started = time.monotonic()
    summary = run.finish(timeout=20)
    assert time.monotonic() - started < 2
    assert summary.writers == {} and Registry.closes == [("FINISHED", True)]


def test_a_registry_that_raises_costs_no_record(registry: type[Registry], tmp_path: Path) -> None:
    """Publishing and reading raise on every call: every value is delivered all the same, the run
    closes as meant, and the failures are counted in the summary."""
    Registry.publish_raises = Registry.read_raises = True
    run = tracking_core.start_run(backends=["registry"], tracking_dir=tmp_path / "td")
    child = tracking_core.attach(role="actor", writer=True, collect=False)
    for step in range(50):
        child.log_metrics({"loss": float(step), "lr": 0.1}, step=step)
        if step % 10 == 0:
            time.sleep(0.6)  # delivery catches up between bursts: publications fall due
    child_summary = child.finish()
    summary = run.finish()
    assert child_summary.drained and summary.drained
    assert sorted(s for n, s, _ in Registry.values if n == "actor/loss") == list(range(50))
    assert len([1 for n, _, _ in Registry.values if n == "actor/lr"]) == 50
    assert Registry.published == [] and Registry.closes == [("FINISHED", False), ("FINISHED", True)]
    assert child_summary.backends["registry"]["failures"].get("publish_writer: ConnectionError", 0) >= 2
    assert summary.backends["registry"]["failures"].get("read_writers: ConnectionError") == 1


# -- MLflow, across simulated nodes --------------------------------------------------------------

NODE_WRITER = JOBS / "writer_registry_node.py"


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


def _steps(uri: str, mlflow_run: str, key: str) -> list[int]:
    return sorted(m.step for m in _client(uri).get_metric_history(mlflow_run, key))


def _registry_tags(uri: str, mlflow_run: str) -> dict[str, Any]:
    tags = _client(uri).get_run(mlflow_run).data.tags
    found = [json.loads(v) for k, v in tags.items() if k.startswith("tracking_core.writer.")]
    return {state["label"]: state for state in found}


def _primary(tmp_path: Path, uri: str, monkeypatch: pytest.MonkeyPatch) -> tracking_core.Run:
    for name in ("TRACKING_CORE_RUN", "TRACKING_CORE_BACKENDS", "TRACKING_CORE_RUN_ID", "TRACKING_CORE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    run = tracking_core.start_run(
        backends=["mlflow"],
        tracking_dir=tmp_path / "node0",
        options={"mlflow_tracking_uri": uri, "mlflow_experiment": "writer-registry"},
        export=False,
    )
    run.log_metrics({"reward": 1.0}, step=0, step_key="train/step")
    assert run.flush(timeout=60)
    return run


def _start_writer(
    node: SimulatedNode, handle: dict[str, Any], mode: str, env: dict[str, str] | None = None
) -> tuple[Any, Path]:
    go = node.cwd / "go"
    env = {"TRACKING_CORE_RUN": json.dumps(handle), "TRACKING_CORE_WRITER_HEARTBEAT": "1", **(env or {})}
    return node.start([sys.executable, NODE_WRITER, go, mode], env=env, label="writer"), go


def _critic(uri: str, mlflow_run: str) -> dict[str, Any] | None:
    return next((s for s in _registry_tags(uri, mlflow_run).values() if s.get("role") == "critic"), None)


def _await_critic(uri: str, mlflow_run: str, journaled: int, timeout: float = 120) -> dict[str, Any]:
    """The critic's publication once it says it has delivered all of its ``journaled`` values,
    in a heartbeat after the one that said so first (the registry has heard it since)."""
    deadline = time.monotonic() + timeout
    first = None
    while time.monotonic() < deadline:
        state = _critic(uri, mlflow_run)
        if state and state["journaled"] == state["delivered"] == journaled:
            first = first or state
            if state != first:
                return state
        time.sleep(0.2)
    raise AssertionError(f"the critic never said it had delivered {journaled} values: {_critic(uri, mlflow_run)}")


#: Python >= 3.11's ``time.sleep`` waits with ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)``,
#: which libfaketime 0.9.10 (Debian's) breaks when the monotonic clock is not faked: EINVAL
#: (wolfcw/libfaketime#426). On the skewed node, Python sleeps with ``select`` instead: this
#: ``sitecustomize`` goes on its ``PYTHONPATH``.
SLEEP_SHIM = JOBS / "writer_registry_sleep_shim.py"


def _skewed(node: SimulatedNode, skew: int) -> dict[str, str]:
    """The environment that sets ``node``'s wall clock ``skew`` seconds off (libfaketime; its
    monotonic clock untouched)."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1") + glob.glob("/usr/lib/faketime/libfaketime.so.1"))
    if not found:
        pytest.skip("libfaketime is not installed (apt-get install faketime; ./run.sh test installs it as root)")
    shim = node.root / "sleep-shim"
    shim.mkdir(exist_ok=True)
    shutil.copyfile(SLEEP_SHIM, shim / "sitecustomize.py")
    return {"LD_PRELOAD": found[0], "FAKETIME": f"{skew:+d}", "DONT_FAKE_MONOTONIC": "1", "PYTHONPATH": os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))}


def _check_skew(state: dict[str, Any], skew: int) -> None:
    """The node's publication was made by a clock ``skew`` seconds off this one."""
    off = state["at"] - time.time()
    assert skew - 4 <= off <= skew + 0.5, (off, skew)


@pytest.mark.slow
def test_a_healthy_writer_on_another_node_is_complete_and_the_run_finished(
    mlflow_server: MlflowServer,  # noqa: F811
    simulated_nodes: list[SimulatedNode],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri = mlflow_server.uri
    run = _primary(tmp_path, uri, monkeypatch)
    node = SimulatedNode("node1", tmp_path / "nodes")
    simulated_nodes.append(node)
    writer, go = _start_writer(node, json.loads(run.handle.to_json()), "finish")
    writer.wait_for("flushed", 90)
    go.touch()
    writer.wait_for("finished True", 60)
    assert writer.wait(30) == 0, writer.tail()
    started = time.monotonic()
    summary = run.finish(timeout=30)
    took = time.monotonic() - started
    assert summary.drained and summary.writers == {}, summary.describe()
    assert took < 5, took
    mlflow_run = run.handle.backends["mlflow"]["run_id"]
    info = _client(uri).get_run(mlflow_run)
    assert info.info.status == "FINISHED"
    assert "tracking_core.incomplete" not in info.data.tags and "tracking_core.intended_status" not in info.data.tags
    states = _registry_tags(uri, mlflow_run)
    (critic,) = [s for s in states.values() if s["role"] == "critic"]
    assert critic["state"] == "complete" and critic["host"] == "node1" and critic["rank"] == 0
    assert (critic["journaled"], critic["delivered"]) == (4, 4)
    assert critic["sync"] == sync_command(str(node.tracking_dir))
    assert states[run.label]["state"] == "complete"
    assert _steps(uri, mlflow_run, "critic/loss") == [0, 1, 2, 3]


@pytest.mark.slow
def test_a_lost_node_is_named_and_its_sync_completes_the_run_exactly_once(
    mlflow_server: MlflowServer,  # noqa: F811
    simulated_nodes: list[SimulatedNode],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri = mlflow_server.uri
    run = _primary(tmp_path, uri, monkeypatch)
    mlflow_run = run.handle.backends["mlflow"]["run_id"]
    link = Link("127.0.0.1", int(uri.rsplit(":", 1)[1]))
    try:
        handle = json.loads(run.handle.to_json())
        handle["backends"]["mlflow"]["tracking_uri"] = link.uri  # node1's route to the server
        node = SimulatedNode("node1", tmp_path / "nodes")
        simulated_nodes.append(node)
        writer, go = _start_writer(node, handle, "die")
        writer.wait_for("flushed", 90)
        time.sleep(1.5)  # a heartbeat after the flush: the registry knows step 0 was delivered
        link.hold()  # what node1 sends from now on never arrives
        go.touch()
        writer.wait_for("logged", 30)
        node.kill()  # node1 lost: the writer and its delivery process
        link.sever()
        summary = run.finish(timeout=30)
        assert _steps(uri, mlflow_run, "critic/loss") == [0]

        (entry,) = summary.writers.values()
        assert (entry["role"], entry["rank"], entry["host"]) == ("critic", 0, "node1")
        command = entry["sync"]
        assert command == sync_command(str(node.tracking_dir))
        text = summary.describe()
        assert "critic rank 0 on host node1" in text and f"run on node1: {command}" in text, text
        assert "last heard" in text and not summary.drained
        info = _client(uri).get_run(mlflow_run)
        assert info.info.status == "FAILED"
        assert info.data.tags["tracking_core.intended_status"] == "FINISHED"
        incomplete = info.data.tags["tracking_core.incomplete"]
        assert "critic rank 0 on host node1" in incomplete and command in incomplete

        link.release()
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        done = node.run(["sh", "-c", command], env={"PATH": path}, label="sync", timeout=120)
        assert done.returncode == 0, done.stdout
        assert _steps(uri, mlflow_run, "critic/loss") == [0, 1, 2, 3]  # each value once
        info = _client(uri).get_run(mlflow_run)
        assert info.info.status == "FINISHED"
        assert "tracking_core.incomplete" not in info.data.tags
        (critic,) = [s for s in _registry_tags(uri, mlflow_run).values() if s["role"] == "critic"]
        assert critic["state"] == "complete" and (critic["journaled"], critic["delivered"]) == (4, 4)
        assert _steps(uri, mlflow_run, "reward") == [0]
    finally:
        link.close()


SKEWS = [300, -300, 2, -2]


@pytest.mark.slow
@pytest.mark.parametrize("skew", SKEWS)
def test_a_node_cut_off_after_catching_up_is_named_whatever_its_clock(
    mlflow_server: MlflowServer,  # noqa: F811
    simulated_nodes: list[SimulatedNode],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    skew: int,
) -> None:
    """node1's clock is ``skew`` seconds off: its writer catches up (and says so), is cut off
    from the server, journals 3 more values. The driver names it and closes the run FAILED:
    a caught-up publication made before the close proves nothing, whatever its time says."""
    uri = mlflow_server.uri
    run = _primary(tmp_path, uri, monkeypatch)
    mlflow_run = run.handle.backends["mlflow"]["run_id"]
    link = Link("127.0.0.1", int(uri.rsplit(":", 1)[1]))
    try:
        handle = json.loads(run.handle.to_json())
        handle["backends"]["mlflow"]["tracking_uri"] = link.uri
        node = SimulatedNode("node1", tmp_path / "nodes")
        simulated_nodes.append(node)
        writer, go = _start_writer(node, handle, "die", _skewed(node, skew))
        writer.wait_for("flushed", 90)
        _check_skew(_await_critic(uri, mlflow_run, 1), skew)
        link.hold()
        go.touch()
        writer.wait_for("logged", 30)
        summary = run.finish(timeout=30)
        assert [(e["role"], e["host"]) for e in summary.writers.values()] == [("critic", "node1")], summary.describe()
        assert _client(uri).get_run(mlflow_run).info.status == "FAILED"
        assert _steps(uri, mlflow_run, "critic/loss") == [0]
    finally:
        link.close()


@pytest.mark.slow
@pytest.mark.parametrize("skew", SKEWS)
def test_a_healthy_node_is_not_named_whatever_its_clock(
    mlflow_server: MlflowServer,  # noqa: F811
    simulated_nodes: list[SimulatedNode],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    skew: int,
) -> None:
    """node1's clock is ``skew`` seconds off; its writer has delivered everything and goes on
    heartbeating while the driver finishes: nobody is named, the run is FINISHED."""
    uri = mlflow_server.uri
    run = _primary(tmp_path, uri, monkeypatch)
    mlflow_run = run.handle.backends["mlflow"]["run_id"]
    node = SimulatedNode("node1", tmp_path / "nodes")
    simulated_nodes.append(node)
    writer, go = _start_writer(node, json.loads(run.handle.to_json()), "die", _skewed(node, skew))
    writer.wait_for("flushed", 90)
    go.touch()
    writer.wait_for("logged", 30)
    _check_skew(_await_critic(uri, mlflow_run, 4), skew)
    started = time.monotonic()
    summary = run.finish(timeout=30)
    assert summary.writers == {} and summary.drained, summary.describe()
    assert time.monotonic() - started < 10
    assert _client(uri).get_run(mlflow_run).info.status == "FINISHED"
    assert _steps(uri, mlflow_run, "critic/loss") == [0, 1, 2, 3]
    node.kill()


SLACK_TOKEN = "xoxb-1234567890-abcdefghij"
GITHUB_TOKEN = "ghp_" + "a1" * 18


@pytest.mark.slow
def test_a_token_in_a_host_name_or_a_tracking_directory_reaches_no_tag(
    mlflow_server: MlflowServer,  # noqa: F811
    simulated_nodes: list[SimulatedNode],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer on a node whose host name has a token's shape, writing under a tracking
    directory whose path holds another: the registry's fields are redacted like any other."""
    from tracking_core.config.secrets import redact_text

    uri = mlflow_server.uri
    run = _primary(tmp_path, uri, monkeypatch)
    mlflow_run = run.handle.backends["mlflow"]["run_id"]
    node = SimulatedNode(SLACK_TOKEN, tmp_path / "nodes")
    simulated_nodes.append(node)
    folder = node.root / GITHUB_TOKEN / "tracking"
    folder.mkdir(parents=True)
    writer, go = _start_writer(node, json.loads(run.handle.to_json()), "finish", {"TRACKING_CORE_DIR": str(folder)})
    writer.wait_for("flushed", 90)
    go.touch()
    writer.wait_for("finished True", 60)
    assert writer.wait(30) == 0, writer.tail()
    summary = run.finish(timeout=30)
    assert summary.drained and summary.writers == {}, summary.describe()
    data = _client(uri).get_run(mlflow_run).data
    stored = json.dumps([data.tags, data.params, sorted(data.metrics)])
    assert SLACK_TOKEN not in stored and GITHUB_TOKEN not in stored
    critic = _critic(uri, mlflow_run)
    assert critic is not None and critic["state"] == "complete"
    assert critic["host"] == redact_text(SLACK_TOKEN) != SLACK_TOKEN
    assert critic["tracking_dir"] == redact_text(str(folder)) and critic["sync"] == redact_text(sync_command(str(folder)))
    assert _steps(uri, mlflow_run, "critic/loss") == [0, 1, 2, 3]
