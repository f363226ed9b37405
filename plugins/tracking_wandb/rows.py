"""Metric records as W&B history rows: one ``run.log`` call per row, each on a named step axis.

W&B keeps one step per run (``_step``), and it must only grow; in shared mode it is not even the
writer's to choose. Several roles with their own step counters therefore never pass ``step=``:
each row carries its step as the value of its axis (``{"actor/loss": 0.5, "actor/train/step":
3}``) and ``define_metric(name, step_metric=axis)`` makes the axis the metric's x-axis, the way
slime defines ``train/step``, ``rollout/step`` and ``eval/step``. The rows are cut as for every
tracker that logs rows (:mod:`tracking_core.rows`); W&B's also carry the record's timestamp.
Pure functions: no ``wandb``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from tracking_core.plugin_api import MetricRecord
from tracking_core.rows import StepRow, new_definitions
from tracking_core.rows import metric_rows as _metric_rows

__all__ = ["TIMESTAMP_KEY", "WandbRow", "metric_rows", "new_definitions"]

#: The history key W&B reads a row's wall-clock time from; the record's own timestamp goes
#: there, so a retried or replayed batch is the same data.
TIMESTAMP_KEY = "_timestamp"


class WandbRow(StepRow):
    """A W&B history row: the axis's step as an int, the record's time as ``_timestamp``."""

    timestamp_key: ClassVar[str | None] = TIMESTAMP_KEY


def metric_rows(records: Sequence[MetricRecord]) -> list[WandbRow]:
    """The records as W&B history rows (:func:`tracking_core.rows.metric_rows`)."""
    return _metric_rows(records, WandbRow)
