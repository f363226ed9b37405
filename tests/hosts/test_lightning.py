"""A real Lightning ``Trainer`` run with ``TrackingCoreLogger`` as its logger."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.hosts.conftest import (
    HostsEnv,
    RaisingBackend,
    close_to,
    jsonl_lines,
    mlflow_history,
    mlflow_run_id,
    tensorboard_runs,
)

pl = pytest.importorskip("lightning.pytorch", reason="needs tracking-core[lightning]")
torch = pytest.importorskip("torch")

STEPS = 4


class TinyRegression(pl.LightningModule):  # type: ignore[misc]
    def __init__(self, learning_rate: float = 0.05, hidden: int = 4, note: str = "tiny") -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(hidden, 1)
        self.losses: dict[int, float] = {}

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.losses[self.global_step] = float(loss.detach())
        self.log("train_loss", loss, on_step=True, on_epoch=False)
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.learning_rate)

    def train_dataloader(self) -> Any:
        torch.manual_seed(0)
        data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
        return torch.utils.data.DataLoader(data, batch_size=8)


def _fit(logger: Any) -> TinyRegression:
    model = TinyRegression()
    trainer = pl.Trainer(
        logger=logger,
        max_steps=STEPS,
        accelerator="cpu",
        devices=1,
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model)
    assert trainer.global_step == STEPS
    return model


@pytest.mark.slow
def test_importing_the_adapter_does_not_import_lightning() -> None:
    code = "import sys, tracking_core.integrations.lightning; assert 'lightning' not in sys.modules"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    from lightning.pytorch.loggers import Logger

    from tracking_core.integrations.lightning import TrackingCoreLogger

    assert issubclass(TrackingCoreLogger, Logger)


@pytest.mark.slow
def test_a_lightning_trainer_logs_one_run(hosts_env: HostsEnv) -> None:
    from tracking_core.integrations.lightning import TrackingCoreLogger

    logger = TrackingCoreLogger(name="hosts-lightning", version="pl-tiny")
    model = _fit(logger)
    run = logger.experiment
    assert run.finished is not None and run.finished.drained, run.finished
    assert logger.version == "pl-tiny" and logger.name == "hosts-lightning"

    client = hosts_env.client()
    run_id = mlflow_run_id(run)
    mlflow_run = client.get_run(run_id)
    assert mlflow_run.info.status == "FINISHED" and mlflow_run.info.run_name == "pl-tiny"
    assert client.get_experiment(mlflow_run.info.experiment_id).name == "hosts-lightning"
    assert len(client.search_runs([mlflow_run.info.experiment_id])) == 1
    params = mlflow_run.data.params
    assert params["learning_rate"] == "0.05" and params["hidden"] == "4" and params["note"] == "tiny"
    history = mlflow_history(client, run_id, "train_loss")
    # Lightning logs the loss of the step that just ran at the trainer's step count
    assert [s for s, _ in history] == list(range(STEPS))
    assert all(close_to(v, model.losses[s]) for s, v in history)

    tb = tensorboard_runs(run)["launch"]
    assert [s for s, _ in tb.scalars["train_loss"]] == list(range(STEPS))
    assert all(close_to(v, model.losses[s]) for s, v in tb.scalars["train_loss"])
    assert tb.hparams["learning_rate"] == pytest.approx(0.05)


def test_other_ranks_start_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a rank other than global rank zero the logger neither starts a run nor logs."""
    from lightning.pytorch.utilities import rank_zero_only

    from tracking_core.integrations.lightning import TrackingCoreLogger

    monkeypatch.setattr(rank_zero_only, "rank", 1)
    logger = TrackingCoreLogger(name="not-zero", backends=["jsonl"])
    logger.log_hyperparams({"learning_rate": 0.1})
    logger.log_metrics({"train_loss": 1.0}, step=0)
    logger.finalize("success")
    assert logger.version is None and logger.host_run.run is None
    assert type(logger.experiment).__name__ == "_DummyExperiment"


@pytest.mark.slow
def test_a_tracker_that_always_raises_does_not_stop_lightning(raising_backend: type[RaisingBackend]) -> None:
    from tracking_core.integrations.lightning import TrackingCoreLogger

    logger = TrackingCoreLogger(name="hosts-lightning")
    _fit(logger)
    run = logger.experiment
    assert logger.version == run.run_id
    assert run.backends == ["raising", "jsonl"] and "open_run" in raising_backend.calls
    metrics = [m for m in jsonl_lines(run) if m.get("type") == "metric" and m["key"] == "train_loss"]
    assert [m["step"] for m in metrics] == list(range(STEPS))
