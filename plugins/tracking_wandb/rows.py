"""Metric records as W&B history rows: one ``run.log`` call per row, each on a named step axis.

W&B keeps one step per run (``_step``), and it must only grow; in shared mode it is not even the
writer's to choose. Several roles with their own step counters therefore never pass ``step=``:
each row carries its step as the value of its axis (``{"actor/loss": 0.5, "actor/train/step":
3}``) and ``define_metric(name, step_metric=axis)`` makes the axis the metric's x-axis, the way
slime defines ``train/step``, ``rollout/step`` and ``eval/step``. Pure functions: no ``wandb``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracking_core.plugin_api import MetricRecord

#: The history key W&B reads a row's wall-clock time from; the record's own timestamp goes
#: there, so a retried or replayed batch is the same data.
TIMESTAMP_KEY = "_timestamp"
#: The axis of a record that has a step but no step key: ``<prefix>step``.
DEFAULT_AXIS = "step"


def axis_of(record: MetricRecord) -> str | None:
    """The flat name of ``record``'s step axis, or None when it has neither axis nor step."""
    if record.axis is not None:
        return record.axis
    if record.step is not None:
        return record.prefix + DEFAULT_AXIS
    return None


@dataclass
class Row:
    """One ``run.log`` call: metric values, the axis and its step, the wall-clock time."""

    axis: str | None
    step: int | None
    timestamp: float
    values: dict[str, float] = field(default_factory=dict)

    def data(self) -> dict[str, Any]:
        """What to pass to ``run.log``: the values, then the axis (its step wins over a metric
        of the same name, as slime logs ``train/step`` both ways), then the timestamp."""
        out: dict[str, Any] = dict(self.values)
        if self.axis is not None and self.step is not None:
            out[self.axis] = self.step
        out[TIMESTAMP_KEY] = self.timestamp
        return out


def metric_rows(records: Sequence[MetricRecord]) -> list[Row]:
    """Group consecutive records that share axis, step and timestamp (one caller's log call)
    into rows, in order; a name repeated within a group starts a new row, so nothing is
    overwritten."""
    rows: list[Row] = []
    current: Row | None = None
    for record in records:
        axis = axis_of(record)
        step = None if record.step is None else int(record.step)
        if (
            current is None
            or current.axis != axis
            or current.step != step
            or current.timestamp != record.timestamp
            or record.name in current.values
        ):
            current = Row(axis, step, record.timestamp)
            rows.append(current)
        current.values[record.name] = record.value
    return rows


def new_definitions(
    rows: Iterable[Row], axes: set[str], metric_axis: dict[str, str]
) -> tuple[list[str], list[tuple[str, str]]]:
    """The axes and ``(metric, axis)`` pairs not yet defined, updating ``axes`` and
    ``metric_axis`` (a metric that moves to another axis is defined again)."""
    new_axes: list[str] = []
    new_pairs: list[tuple[str, str]] = []
    for row in rows:
        if row.axis is None:
            continue
        if row.axis not in axes:
            axes.add(row.axis)
            new_axes.append(row.axis)
        for name in row.values:
            if name != row.axis and metric_axis.get(name) != row.axis:
                metric_axis[name] = row.axis
                new_pairs.append((name, row.axis))
    return new_axes, new_pairs
