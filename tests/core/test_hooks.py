"""One test per hook of the contract (the meta-test in test_contract.py insists on it)."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tracking_core
from tracking_core.plugins import get_plugin_manager
from tracking_core.records import (
    ArtifactRecord,
    HistogramRecord,
    RunStatus,
    TableRecord,
    TextRecord,
)


class Recorder:
    """A real backend that keeps every call in memory (and a copy of what it acknowledged)."""

    instances: list[Recorder] = []

    def __init__(self, run: tracking_core.RunContext) -> None:
        self.context = run
        self.calls: list[tuple[str, Any]] = []
        Recorder.instances.append(self)

    @tracking_core.hookimpl
    def open_run(self, run: tracking_core.RunContext) -> dict[str, Any]:
        self.calls.append(("open_run", run.run_id))
        return {"token": f"rec-{run.run_id}"}

    @tracking_core.hookimpl
    def attach_run(self, run: tracking_core.RunContext, attach: dict[str, Any]) -> None:
        self.calls.append(("attach_run", (run.role, dict(attach), run.primary, run.resume)))

    @tracking_core.hookimpl
    def log_config(self, config: tracking_core.ConfigSection, role: str | None) -> None:
        self.calls.append(("log_config", (role, config)))

    @tracking_core.hookimpl
    def log_metrics(self, records: list[tracking_core.MetricRecord]) -> None:
        self.calls.append(("log_metrics", list(records)))

    @tracking_core.hookimpl
    def log_table(self, table: TableRecord) -> None:
        self.calls.append(("log_table", table))

    @tracking_core.hookimpl
    def log_histogram(self, histogram: HistogramRecord) -> None:
        self.calls.append(("log_histogram", histogram))

    @tracking_core.hookimpl
    def log_text(self, text: TextRecord) -> None:
        self.calls.append(("log_text", text))

    @tracking_core.hookimpl
    def log_artifact(self, artifact: ArtifactRecord) -> None:
        self.calls.append(("log_artifact", (artifact, artifact.sha256(), Path(artifact.path).exists())))

    @tracking_core.hookimpl
    def close_run(self, status: RunStatus, run: tracking_core.RunContext) -> None:
        self.calls.append(("close_run", (status, run.primary)))

    def of(self, hook: str) -> list[Any]:
        return [payload for name, payload in self.calls if name == hook]


class RecorderPlugin:
    @tracking_core.hookimpl
    def register_backends(self, register: Any) -> None:
        from tracking_core.plugin_api import Backend
        register(Backend("recorder", Recorder, description="in-memory test backend"))


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Recorder]]:
    monkeypatch.delenv("TRACKING_CORE_RUN", raising=False)
    monkeypatch.delenv("TRACKING_CORE_BACKENDS", raising=False)
    monkeypatch.chdir(tmp_path)
    manager = get_plugin_manager()
    manager.register(RecorderPlugin(), "recorder-plugin")
    Recorder.instances = []
    try:
        yield Recorder
    finally:
        manager.unregister("recorder-plugin")


def test_hook_register_backends(recorder: type[Recorder]) -> None:
    manager = get_plugin_manager()
    spec = manager.backends["recorder"]
    assert spec.plugin == "recorder-plugin" and spec.factory is Recorder
    assert manager.plugins["recorder-plugin"].backends == ["recorder"]
    with pytest.raises(tracking_core.UnknownBackend) as err:
        manager.select(["recorder", "nope"])
    assert "'nope'" in str(err.value) and "recorder" in str(err.value) and "jsonl" in str(err.value)


def test_missing_library_names_the_extra(recorder: type[Recorder]) -> None:
    class NeedsLib:
        @tracking_core.hookimpl
        def register_backends(self, register: Any) -> None:
            from tracking_core.plugin_api import Backend
            register(Backend("needy", Recorder, requires=["no_such_module_xyz"], extra="needy"))

    manager = get_plugin_manager()
    manager.register(NeedsLib(), "needs-lib")
    try:
        with pytest.raises(tracking_core.BackendUnavailable) as err:
            tracking_core.start_run(backends="needy")
        assert 'pip install "tracking-core[needy]"' in str(err.value)
        assert "no_such_module_xyz" in str(err.value)
    finally:
        manager.unregister("needs-lib")


def test_hook_add_options() -> None:
    class Options:
        @tracking_core.hookimpl
        def add_options(self, parser: tracking_core.HostParser) -> None:
            parser.add_argument("--wandb-project", default="mine")
            parser.add_argument("--recorder-depth", type=int, default=3)

    manager = get_plugin_manager()
    manager.register(Options(), "options-plugin")
    try:
        host = argparse.ArgumentParser()
        host.add_argument("--wandb-project", default="host's")  # as slime defines it
        host.add_argument("--tracking-dir", default="/host/dir")
        added = tracking_core.add_tracking_options(host)
        args = host.parse_args(["--recorder-depth", "5"])
    finally:
        manager.unregister("options-plugin")
    assert args.wandb_project == "host's" and args.recorder_depth == 5
    assert args.tracking_dir == "/host/dir" and args.tracking_backends is None
    assert "--wandb-project" in added.reused and "--tracking-dir" in added.reused
    assert "--recorder-depth" in added.added and "--tracking-backends" in added.added


def test_hook_host_backends(recorder: type[Recorder], monkeypatch: pytest.MonkeyPatch) -> None:
    from tracking_core.selection import resolve_backend_names

    class Host:
        @tracking_core.hookimpl
        def host_backends(self, args: Any) -> list[str] | None:
            return ["recorder"] if getattr(args, "use_recorder", False) else None

    manager = get_plugin_manager()
    manager.register(Host(), "host-plugin")
    try:
        args = argparse.Namespace(use_recorder=True, tracking_backends=None)
        assert resolve_backend_names(args, manager=manager)[0] == ["recorder"]
        monkeypatch.setenv("TRACKING_CORE_BACKENDS", "jsonl")
        assert resolve_backend_names(args, manager=manager) == (["jsonl"], "$TRACKING_CORE_BACKENDS")
        args.tracking_backends = "recorder,jsonl"
        assert resolve_backend_names(args, manager=manager)[0] == ["recorder", "jsonl"]
        assert resolve_backend_names(args, "jsonl", manager=manager)[0] == ["jsonl"]
        monkeypatch.delenv("TRACKING_CORE_BACKENDS")
        args.tracking_backends = None
        args.use_recorder = False
        names, source = resolve_backend_names(args, manager=manager)
        assert names == ["mlflow"] and source == "the embedded default"
    finally:
        manager.unregister("host-plugin")


def test_hook_collect_config(recorder: type[Recorder], caplog: pytest.LogCaptureFixture) -> None:
    class First:
        @tracking_core.hookimpl
        def collect_config(self, role: str) -> dict[str, Any]:
            return {"seed": 1, "shared": "same", "role_seen": role}

    class Second:
        @tracking_core.hookimpl
        def collect_config(self, role: str, args: Any) -> dict[str, Any]:
            return {"seed": 2, "shared": "same", "from_args": getattr(args, "lr", None)}

    manager = get_plugin_manager()
    manager.register(First(), "first-collector")
    manager.register(Second(), "second-collector")
    try:
        run = tracking_core.start_run(backends="recorder")
        with caplog.at_level(logging.WARNING, logger="tracking_core.collectors"):
            child = tracking_core.attach(role="critic", writer=True, args=argparse.Namespace(lr=0.1))
        child.finish()
        run.finish()
    finally:
        manager.unregister("first-collector")
        manager.unregister("second-collector")
    (role, section), = Recorder.instances[1].of("log_config")
    assert role == "critic"
    assert section.params["critic/seed"] == 2  # later in load order wins ...
    assert section.params["critic/role_seen"] == "critic"
    assert section.params["critic/from_args"] == 0.1
    conflicts = section.report["collector_conflicts"]
    assert [c["key"] for c in conflicts] == ["seed"]  # ... and the conflict is reported, once
    assert conflicts[0]["plugins"] == ["first-collector", "second-collector"]
    assert "'first-collector' and 'second-collector' disagree on 'seed'" in caplog.text
    saved = json.loads((run.handle.run_dir / "config" / "critic.json").read_text())
    assert "collector_conflicts" in json.dumps(saved)


def test_hook_open_run(recorder: type[Recorder]) -> None:
    run = tracking_core.start_run(backends=["recorder"], config={"lr": 1})
    primary = Recorder.instances[0]
    assert primary.of("open_run") == [run.run_id]
    assert run.handle.backends == {"recorder": {"token": f"rec-{run.run_id}"}}
    saved = json.loads((run.handle.run_dir / "handle.json").read_text())
    assert saved["backends"]["recorder"]["token"] == f"rec-{run.run_id}"
    run.finish()
    # the instance was a plugin for the life of the run only
    assert get_plugin_manager().pm.get_plugin("recorder") is None


def test_hook_attach_run(recorder: type[Recorder]) -> None:
    run = tracking_core.start_run(backends=["recorder"])
    child = tracking_core.attach(role="actor", writer=True, collect=False)
    child.finish()
    assert Recorder.instances[1].of("attach_run") == [
        ("actor", {"token": f"rec-{run.run_id}"}, False, False)
    ]
    # a non-writer rank gets a no-op run: no backend is built
    other = tracking_core.attach(role="actor", writer=False)
    assert isinstance(other, tracking_core.NullRun) and len(Recorder.instances) == 2
    other.log_metrics({"x": 1.0}, step=1)
    run.finish()
    # resume: a primary started with the saved handle re-attaches instead of opening
    resumed = tracking_core.start_run(handle=run.handle.run_dir)
    resumed.finish()
    assert Recorder.instances[2].of("open_run") == []
    assert Recorder.instances[2].of("attach_run") == [
        (None, {"token": f"rec-{run.run_id}"}, True, True)
    ]


def test_hook_log_config(recorder: type[Recorder]) -> None:
    args = argparse.Namespace(lr=3e-4, wandb_key="0123456789abcdef0123456789abcdef01234567")
    run = tracking_core.start_run(args=args, backends=["recorder"])
    run.log_config({"lr": 1e-5}, role="critic")
    run.finish()
    (launch_role, launch), (critic_role, critic) = Recorder.instances[0].of("log_config")
    assert launch_role is None and launch.namespace == "launch" and launch.params["lr"] == 3e-4
    assert "0123456789abcdef" not in json.dumps(launch.params, default=str)
    assert critic_role == "critic" and critic.params == {"critic/lr": 1e-5}


def test_hook_log_metrics(recorder: type[Recorder]) -> None:
    run = tracking_core.start_run(backends=["recorder"])
    child = tracking_core.attach(role="actor", writer=True, collect=False)
    for step in range(5):
        child.log_metrics({"loss": 1.0 / (step + 1), "note": "not a number"}, step=step, step_key="train/step")
    passthrough = tracking_core.attach(role="critic", writer=True, collect=False, metric_prefix="")
    passthrough.log_metrics({"train/critic-value_loss": 0.5}, step=0, step_key="train/step")
    summary = child.finish()
    passthrough.finish()
    run.finish()
    records = [r for batch in Recorder.instances[1].of("log_metrics") for r in batch]
    assert [(r.name, r.step, r.axis) for r in records] == [
        ("actor/loss", s, "actor/train/step") for s in range(5)
    ]
    assert [r.value for r in records] == [1.0 / (s + 1) for s in range(5)]
    assert len({r.seq for r in records}) == 5 and all(r.timestamp > 0 for r in records)
    assert summary.skipped == {"actor/note": 5}
    critic = [r for batch in Recorder.instances[2].of("log_metrics") for r in batch]
    assert [(r.name, r.axis) for r in critic] == [("train/critic-value_loss", "train/step")]


def test_hook_log_table(recorder: type[Recorder]) -> None:
    pandas = pytest.importorskip("pandas")
    run = tracking_core.start_run(backends=["recorder"])
    child = tracking_core.attach(role="actor", writer=True, collect=False)
    child.log_table("samples", [{"prompt": "p", "reward": 1}, {"prompt": "q", "len": 3}], step=2, step_key="rollout/step")
    child.log_table("frame", pandas.DataFrame({"a": [1, 2], "b": ["x", "y"]}), step=3)
    child.finish()
    run.finish()
    first, frame = Recorder.instances[1].of("log_table")
    assert (first.name, first.step, first.axis) == ("actor/samples", 2, "actor/rollout/step")
    assert first.columns == ("prompt", "reward", "len")
    assert first.rows == (("p", 1, None), ("q", None, 3))
    assert first.as_dicts()[1] == {"prompt": "q", "reward": None, "len": 3}
    assert frame.columns == ("a", "b") and frame.rows == ((1, "x"), (2, "y"))


def test_hook_log_histogram(recorder: type[Recorder]) -> None:
    torch = pytest.importorskip("torch")
    run = tracking_core.start_run(backends=["recorder"])
    run.log_histogram("reward", torch.tensor([0.0, 1.0, 1.0, 3.0, float("nan")]), step=1, bins=3)
    run.finish()
    (h,) = Recorder.instances[0].of("log_histogram")
    assert (h.name, h.step, h.count, h.non_finite) == ("reward", 1, 4, 1)
    assert h.counts == (1, 2, 1) and h.edges == (0.0, 1.0, 2.0, 3.0)
    assert (h.min, h.max, h.sum, h.sum_squares, h.mean) == (0.0, 3.0, 5.0, 11.0, 1.25)
    assert h.percentiles["p50"] == 1.0 and set(h.percentiles) == {"p5", "p25", "p50", "p75", "p95"}


def test_hook_log_text(recorder: type[Recorder]) -> None:
    run = tracking_core.start_run(backends=["recorder"])
    token = "ghp_" + "x" * 36
    run.log_text("notes", f"pushed with {token}", step=4)
    run.finish()
    (text,) = Recorder.instances[0].of("log_text")
    assert (text.name, text.step) == ("notes", 4)
    assert token not in text.text and text.text.startswith("pushed with <redacted")


def test_hook_log_artifact(recorder: type[Recorder], tmp_path: Path) -> None:
    import hashlib

    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(b"weights" * 100)
    run = tracking_core.start_run(backends=["recorder"])
    run.log_artifact(ckpt, kind="model")
    ckpt.unlink()  # rotated away at once: the snapshot is delivered
    run.finish()
    ((artifact, digest, existed),) = Recorder.instances[0].of("log_artifact")
    assert (artifact.name, artifact.kind, artifact.size, artifact.is_dir) == ("model.pt", "model", 700, False)
    assert artifact.snapshot and existed and artifact.source == str(ckpt)
    assert digest == hashlib.sha256(b"weights" * 100).hexdigest()
    assert not Path(artifact.path).exists()  # the snapshot went with the journal


def test_hook_close_run(recorder: type[Recorder]) -> None:
    run = tracking_core.start_run(backends=["recorder"])
    child = tracking_core.attach(role="actor", writer=True, collect=False)
    child.finish()
    summary = run.finish(status="KILLED")
    assert summary.status is RunStatus.KILLED
    assert Recorder.instances[0].of("close_run") == [(RunStatus.KILLED, True)]
    assert Recorder.instances[1].of("close_run") == [(RunStatus.FINISHED, False)]
    with pytest.raises(ZeroDivisionError), tracking_core.start_run(backends=["recorder"]):
        1 / 0  # noqa: B018
    assert Recorder.instances[2].of("close_run") == [(RunStatus.FAILED, True)]
