"""A real Accelerate training loop with ``TrackingCoreTracker`` in ``log_with``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.subprocess_python import JOBS
from tests.hosts.conftest import (
    HostsEnv,
    RaisingBackend,
    close_to,
    jsonl_lines,
    mlflow_history,
    mlflow_run_id,
    tensorboard_runs,
)

pytest.importorskip("accelerate", reason="needs tracking-core[accelerate]")
torch = pytest.importorskip("torch")

STEPS = 5
CONFIG = {"learning_rate": 0.05, "batch_size": 8, "optimizer": "sgd", "hidden": [4, 1]}


def _train(tracker: object) -> list[float]:
    """A few steps of a tiny regression, logged the way Accelerate's examples log."""
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True, log_with=[tracker])
    accelerator.init_trackers("hosts-accelerate", config=CONFIG)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=CONFIG["learning_rate"])
    model, optimizer = accelerator.prepare(model, optimizer)
    x, y = torch.randn(CONFIG["batch_size"], 4), torch.randn(CONFIG["batch_size"], 1)
    losses = []
    for step in range(STEPS):
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.item()))
        accelerator.log({"train/loss": losses[-1], "train/epoch": 0}, step=step)
    accelerator.end_training()
    return losses


@pytest.mark.slow
def test_importing_the_adapter_does_not_import_accelerate() -> None:
    code = "import sys, tracking_core.integrations.accelerate; assert 'accelerate' not in sys.modules"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    from accelerate.tracking import GeneralTracker

    from tracking_core.integrations.accelerate import TrackingCoreTracker

    assert issubclass(TrackingCoreTracker, GeneralTracker)


@pytest.mark.slow
def test_an_accelerate_loop_logs_one_run(hosts_env: HostsEnv) -> None:
    from tracking_core.integrations.accelerate import TrackingCoreTracker

    tracker = TrackingCoreTracker(run_name="acc-linear", project="hosts-accelerate")
    losses = _train(tracker)
    run = tracker.tracker
    assert run is not None and run.finished is not None and run.finished.drained, run.finished

    client = hosts_env.client()
    run_id = mlflow_run_id(run)
    mlflow_run = client.get_run(run_id)
    assert mlflow_run.info.status == "FINISHED" and mlflow_run.info.run_name == "acc-linear"
    assert client.get_experiment(mlflow_run.info.experiment_id).name == "hosts-accelerate"
    assert len(client.search_runs([mlflow_run.info.experiment_id])) == 1
    params = mlflow_run.data.params
    assert params["learning_rate"] == "0.05" and params["batch_size"] == "8"
    assert params["optimizer"] == "sgd" and params["hidden"] == "[4, 1]"
    history = mlflow_history(client, run_id, "train/loss")
    assert [s for s, _ in history] == list(range(STEPS))
    assert all(close_to(v, losses[s]) for s, v in history)
    assert losses[-1] < losses[0]  # it trained

    tb = tensorboard_runs(run)["launch"]
    assert [s for s, _ in tb.scalars["train/loss"]] == list(range(STEPS))
    assert all(close_to(v, losses[s]) for s, v in tb.scalars["train/loss"])
    assert tb.hparams["learning_rate"] == pytest.approx(0.05)
    assert "config/launch" in tb.text


def test_a_wrong_backend_is_a_clear_error_at_init_trackers() -> None:
    from accelerate import Accelerator

    from tracking_core import UnknownBackend
    from tracking_core.integrations.accelerate import TrackingCoreTracker

    accelerator = Accelerator(cpu=True, log_with=[TrackingCoreTracker(backends=["mlfow"])])
    with pytest.raises(UnknownBackend, match="did you mean 'mlflow'"):
        accelerator.init_trackers("hosts-accelerate", config=CONFIG)


def test_other_processes_start_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a process other than the main one (Accelerate's own ``on_main_process`` decides), the
    tracker neither starts a run nor logs."""
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType

    from tracking_core.integrations.accelerate import TrackingCoreTracker

    PartialState(cpu=True)
    for name, value in {"distributed_type": DistributedType.MULTI_CPU, "num_processes": 2, "process_index": 1}.items():
        monkeypatch.setitem(PartialState._shared_state, name, value)
    assert PartialState().use_distributed and not PartialState().is_main_process
    tracker = TrackingCoreTracker(run_name="not-main", backends=["jsonl"])
    tracker.start()
    tracker.store_init_configuration(CONFIG)
    tracker.log({"train/loss": 1.0}, step=0)
    tracker.finish()
    assert tracker.tracker is None


@pytest.mark.slow
def test_a_tracker_that_always_raises_does_not_stop_accelerate(raising_backend: type[RaisingBackend]) -> None:
    from tracking_core.integrations.accelerate import TrackingCoreTracker

    tracker = TrackingCoreTracker(run_name="acc-raising")
    losses = _train(tracker)
    assert len(losses) == STEPS
    run = tracker.tracker
    assert run.backends == ["raising", "jsonl"] and "open_run" in raising_backend.calls
    metrics = [m for m in jsonl_lines(run) if m.get("type") == "metric" and m["key"] == "train/loss"]
    assert [m["step"] for m in metrics] == list(range(STEPS))


# -- by name: Accelerator(log_with="tracking_core") ----------------------------------------------
BY_NAME = JOBS / "accelerate_by_name.py"


@pytest.mark.slow
@pytest.mark.parametrize(
    "first",
    [
        "tracking_core",  # tracking-core first
        "accelerate",  # or after Accelerate
    ],
    ids=["tracking-core-first", "accelerate-first"],
)
def test_log_with_the_name_after_import_tracking_core(hosts_env: HostsEnv, first: str) -> None:
    """Only ``import tracking_core``, in either order with Accelerate: the name is known to
    Accelerate (its register_tracker_class), the project name of init_trackers is the MLflow
    experiment and init_kwargs["tracking_core"] reach the tracker."""
    import json

    run_name = f"by-name-{first.replace('_', '-')}"
    out = subprocess.run([sys.executable, str(BY_NAME), first, run_name], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["drained"]
    client = hosts_env.client()
    mlflow_run = client.get_run(result["mlflow_run"])
    assert mlflow_run.info.status == "FINISHED" and mlflow_run.info.run_name == run_name
    assert client.get_experiment(mlflow_run.info.experiment_id).name == "acc-by-name"
    assert mlflow_run.data.params["learning_rate"] == "0.05"
    assert mlflow_history(client, result["mlflow_run"], "train/loss") == [(0, 1.0), (1, 0.5), (2, 1.0 / 3)]


@pytest.mark.slow
def test_without_importing_tracking_core_accelerate_does_not_know_the_name() -> None:
    """The name is tracking-core's to register: in a process that never imports it, Accelerate
    refuses it with its own error (no file outside the package runs at start-up)."""
    out = subprocess.run([sys.executable, str(JOBS / "accelerate_unknown_name.py")], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Unsupported logging capability: tracking_core" in out.stdout


def test_registration_is_idempotent_and_keeps_the_instance_form() -> None:
    import warnings

    import accelerate.tracking
    from accelerate import Accelerator

    from tracking_core.integrations import accelerate as adapter
    from tracking_core.integrations.accelerate import NamedTrackingCoreTracker, TrackingCoreTracker

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Accelerate warns when a name is registered twice
        adapter.register_by_name()
        adapter.register_by_name()
    assert accelerate.tracking.LOGGER_TYPE_TO_CLASS["tracking_core"] is NamedTrackingCoreTracker
    assert issubclass(NamedTrackingCoreTracker, TrackingCoreTracker)
    named = NamedTrackingCoreTracker("proj", run_name="r", backends=["jsonl"])
    assert (named.run_name, named.host_run.project) == ("r", "proj")
    assert NamedTrackingCoreTracker("proj", project="explicit").host_run.project == "explicit"
    instance = TrackingCoreTracker(run_name="as-object", backends=["jsonl"])
    accelerator = Accelerator(cpu=True, log_with=[instance])
    assert accelerator.log_with == [instance]


def test_an_accelerate_without_register_tracker_class_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Accelerate before 1.16 has no register_tracker_class: registering does nothing (and the
    instance form is unaffected). The function is removed here as those versions lack it."""
    import accelerate.tracking

    from tracking_core.integrations import _accelerate_tracker

    monkeypatch.delattr(accelerate.tracking, "register_tracker_class")
    monkeypatch.setattr(accelerate.tracking, "LOGGER_TYPE_TO_CLASS", dict(accelerate.tracking.LOGGER_TYPE_TO_CLASS))
    accelerate.tracking.LOGGER_TYPE_TO_CLASS.pop("tracking_core", None)
    assert _accelerate_tracker.register() is False
    assert "tracking_core" not in accelerate.tracking.LOGGER_TYPE_TO_CLASS
