"""What a tracker's views say about its data, as the core asks them: where it is (the start
line), how to upload it (the end of the run), its viewer (``tracking-core ui``), its read-back
(``tracking-core show``), a run of its own files without a saved handle, the options a host's
project name sets — and the registration fields that go with them (the viewer's port, the
embedded default)."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import tracking_core
from tracking_core.handle import RunHandle
from tracking_core.plugin_api import Backend, TrackerReport, Viewer, Views
from tracking_core.plugins import get_plugin_manager


class AcmeViews(Views):
    def location(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str]:
        return [f"acme: {entry['dir']}", "  second line"]

    def sync(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str]:
        return [f"acme-upload {entry['dir']}"]

    def viewer(self, entry: Mapping[str, Any], handle: RunHandle, host: str, port: int | None, dry_run: bool) -> Viewer:
        return Viewer("acme", url=f"http://{host}:{port}/", command=["acme-view", str(port), str(dry_run)])

    def read(self, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport:
        return TrackerReport("acme", str(entry["dir"]), status="FINISHED", last={"loss": (0.5, 2)})

    def show_files(self, run: str, tracking_dir: str, limit: int) -> list[str] | None:
        return [f"acme run {run}", f"limit {limit}"] if run.startswith("acme-") else None

    def project_options(self, project: str) -> dict[str, str]:
        return {"acme_project": project}


class BrokenViews(Views):
    def location(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str]:
        raise RuntimeError("boom")

    def read(self, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport:
        raise ImportError("No module named 'acme_sdk'", name="acme_sdk")


class Acme:
    """A tracker plugin as a third party writes it: its backends name their views."""

    @tracking_core.hookimpl
    def register_backends(self, register: Any) -> None:
        register(Backend("acme", "builtins:object", viewer_port=47611, default_rank=1000, views=AcmeViews()))
        register(Backend("acme-missing", "builtins:object", requires=("no_such_sdk_for_tests",), default_rank=2000))
        register(Backend("fragile", "builtins:object", views=BrokenViews()))
        register(Backend("broken", "builtins:object", views=BrokenViews()))


@pytest.fixture
def acme(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID", "WANDB_PROJECT", "SWANLAB_PROJ_NAME",
                 "SWANLAB_PROJECT_NAME", "TRACKIO_PROJECT", "TRACKING_CORE_BACKENDS"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    manager = get_plugin_manager()
    manager.register(Acme(), "acme-plugin")
    try:
        yield
    finally:
        manager.unregister("acme-plugin")


def _handle(tmp_path: Path, backends: dict[str, dict[str, Any]]) -> RunHandle:
    return RunHandle(run_id="r1", name="r1", tracking_dir=str(tmp_path), host="node0", backends=backends)


def test_views_location(acme: None, tmp_path: Path) -> None:
    from tracking_core.viewers import where_to_look

    handle = _handle(tmp_path, {
        "acme": {"dir": "/data/acme"}, "jsonl": {"dir": "/data/jsonl"}, "fragile": {},
        "console": {"stream": "stderr"}, "unknown": {"x": 1},
    })  # fmt: skip
    assert where_to_look(handle) == [
        "acme: /data/acme",
        "  second line",
        "jsonl: /data/jsonl",  # the built-in plugin's answer
        "fragile: (its views raised RuntimeError: boom)",  # one plugin's fault, its own line
        # console: its lines were on the terminal (an empty answer)
        "unknown: {'x': 1}",  # no views answer: the entry itself
    ]


def test_views_sync(acme: None, tmp_path: Path) -> None:
    from tracking_core.viewers import sync_lines

    handle = _handle(tmp_path, {
        "acme": {"dir": "/data/acme"},
        "wandb": {"mode": "offline", "id": "w1", "dir": "/data"},
        "mlflow": {"tracking_uri": "sqlite:///x.db"},
    })  # fmt: skip
    lines = sync_lines(handle)
    assert lines[0] == "acme-upload /data/acme"
    assert lines[1].startswith("W&B offline run w1: upload it with ") and lines[1].endswith("(on node0)")
    assert len(lines) == 3  # W&B's other nodes' line; MLflow has nothing to upload
    assert sync_lines(_handle(tmp_path, {"wandb": {"mode": "online", "id": "w1"}})) == []


def test_views_viewer(acme: None, tmp_path: Path) -> None:
    from tracking_core.viewers import plan_viewers

    handle = _handle(tmp_path, {
        "acme": {"dir": "/data/acme"},
        "mlflow": {"tracking_uri": "http://mlflow.example:5000", "experiment_id": "1", "run_id": "abc"},
        "jsonl": {"dir": "/data/jsonl"},
        "unknown": {"x": 1},
    })  # fmt: skip
    with socket.socket() as taken:  # the declared port is in use: the next free one is given
        taken.bind(("127.0.0.1", 47611))
        viewers = {v.tracker: v for v in plan_viewers(handle, dry_run=True)}
    port = int(viewers["acme"].command[1])  # type: ignore[index]
    assert 47611 < port < 47711 and viewers["acme"].command == ["acme-view", str(port), "True"]
    assert viewers["mlflow"].command is None  # a server: its own UI, the run's page
    assert viewers["mlflow"].url == "http://mlflow.example:5000/#/experiments/1/runs/abc/model-metrics"
    assert viewers["jsonl"].command is None and viewers["jsonl"].note.endswith(f"show {handle.run_dir}")
    assert viewers["unknown"].note == "no viewer known; its entry in the run handle: {'x': 1}"
    # a port given for it (--acme-port) wins; `trackers` limits which
    (only,) = plan_viewers(handle, ports={"acme": 47700}, trackers=["acme"])
    assert only.command == ["acme-view", "47700", "False"]


def test_ui_has_a_port_option_for_each_declared_viewer(acme: None, capsys: pytest.CaptureFixture[str]) -> None:
    from tracking_core import cli

    with pytest.raises(SystemExit):
        cli.main(["ui", "--help"])
    out = capsys.readouterr().out
    assert "--acme-port PORT" in out and "(default 47611," in out
    assert "--mlflow-port PORT" in out and "--tensorboard-port PORT" in out  # declared by the built-ins
    assert "--jsonl-port" not in out  # no local viewer


def test_views_read(acme: None, tmp_path: Path) -> None:
    from tracking_core.readback import read_trackers

    handle = _handle(tmp_path, {"acme": {"dir": "/data/acme"}, "broken": {"dir": "x"}, "swanlab": {"mode": "online"}})
    acme_report, broken, swanlab = read_trackers(handle)
    assert (acme_report.tracker, acme_report.where, acme_report.status) == ("acme", "/data/acme", "FINISHED")
    assert acme_report.last == {"loss": (0.5, 2)}
    assert broken.error is not None and broken.error.startswith("No module named 'acme_sdk'; to read it here: pip install acme_sdk")
    assert swanlab.detail == "no local reader" and swanlab.error is None


def test_views_show_files(acme: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracking_core import cli

    assert cli.main(["show", "acme-7", "--limit", "3", "--tracking-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "acme run acme-7\nlimit 3\n"
    # a jsonl run directory without its saved handle: the jsonl plugin shows it from its files
    run = tracking_core.start_run(backends="jsonl", tracking_dir=tmp_path, config={"lr": 0.5})
    run.log_metrics({"loss": 1.0}, step=0)
    run.finish()
    assert cli.main(["show", str(tmp_path / "jsonl" / run.run_id), "--tracking-dir", str(tmp_path / "elsewhere")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"jsonl run {run.run_id} (") and "status: FINISHED" in out.splitlines()[0]
    assert "\nmetrics: 1 values in 1 series\n  loss: 1\n" in out, out
    # nobody's: said as before, exit status 2
    assert cli.main(["show", "nobodys-run", "--tracking-dir", str(tmp_path)]) == 2
    assert "no saved run 'nobodys-run'" in capsys.readouterr().err


def test_views_project_options(acme: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracking_core.integrations.host_run import project_options

    options = project_options("hosts-proj")
    # every tracker's views name the project, a third party's too
    assert options == {
        "mlflow_experiment": "hosts-proj",
        "wandb_project": "hosts-proj",
        "swanlab_project": "hosts-proj",
        "trackio_project": "hosts-proj",
        "acme_project": "hosts-proj",
    }
    # a tracker's own variable wins: its views set nothing
    for env, dest in (("MLFLOW_EXPERIMENT_ID", "mlflow_experiment"), ("WANDB_PROJECT", "wandb_project"),
                      ("SWANLAB_PROJ_NAME", "swanlab_project"), ("TRACKIO_PROJECT", "trackio_project")):  # fmt: skip
        monkeypatch.setenv(env, "own")
        assert dest not in project_options("hosts-proj"), env
    # a name SwanLab refuses is left to SwanLab's own default (the run still starts)
    monkeypatch.delenv("SWANLAB_PROJ_NAME")
    assert "swanlab_project" not in project_options("my project!")
    assert project_options(None) == {} and project_options("") == {}


def test_the_embedded_default_is_the_installed_backend_of_highest_rank(acme: None) -> None:
    from tracking_core.selection import embedded_default, resolve_backend_names

    manager = get_plugin_manager()
    # acme-missing ranks higher but its requirement is not installed
    assert embedded_default(manager) == "acme"
    assert resolve_backend_names(manager=manager) == (["acme"], "the embedded default")
    manager.unregister("acme-plugin")
    assert embedded_default(manager) == "mlflow"  # the built-ins: mlflow 10 (installed here), jsonl 0
