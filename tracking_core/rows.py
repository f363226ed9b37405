"""Metric records as rows by step, for trackers that log a dict of values at a time.

A tracker such as W&B or SwanLab takes one ``log(values)`` call per row and keeps one step per
call; several roles with their own step counters share one run. So the rows are cut from the
records by their step *axis*: each row carries its step as the value of its axis
(``{"actor/loss": 0.5, "actor/train/step": 3}``) and the tracker is told once which axis is each
metric's x-axis (:class:`AxisDefinitions`). :class:`RowRetry` makes a failed batch's retry start
where the failure stopped, since such a tracker cannot log a batch atomically. Pure Python: no
tracker is imported here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from .records import HistogramRecord, MetricRecord, TableRecord, TextRecord

#: The axis of a record that has a step but no step key: ``<prefix>step``.
DEFAULT_AXIS = "step"


def axis_of(record: MetricRecord | TableRecord | HistogramRecord | TextRecord) -> str | None:
    """The flat name of ``record``'s step axis (its step key's, else ``<prefix>step`` when it
    has a step), or None when it has neither step key nor step."""
    if record.axis is not None:
        return record.axis
    if record.step is not None:
        return record.prefix + DEFAULT_AXIS
    return None


@dataclass
class StepRow:
    """One ``log`` call: metric values, the axis and its step, the wall-clock time, and the
    ``seq`` of its first record (with the time, a stable name for the row across retries).

    A tracker's subclass says how its ``log`` wants them: the type of the axis's value
    (:attr:`step_type`) and the key the timestamp goes under (:attr:`timestamp_key`, None: not
    logged)."""

    axis: str | None
    step: int | None
    timestamp: float
    values: dict[str, float] = field(default_factory=dict)
    first_seq: int = -1

    step_type: ClassVar[type] = int
    timestamp_key: ClassVar[str | None] = None

    def data(self) -> dict[str, Any]:
        """The values, then the axis (its step wins over a metric of the same name, as slime
        logs ``train/step`` both ways), then the timestamp."""
        out: dict[str, Any] = dict(self.values)
        if self.axis is not None and self.step is not None:
            out[self.axis] = self.step_type(self.step)
        if self.timestamp_key is not None:
            out[self.timestamp_key] = self.timestamp
        return out


R = TypeVar("R", bound=StepRow)


def metric_rows(
    records: Sequence[MetricRecord],
    row: type[R] = StepRow,  # type: ignore[assignment]
    axis_of: Callable[[MetricRecord], str | None] = axis_of,
) -> list[R]:
    """Group consecutive records that share axis, step and timestamp (one caller's log call)
    into rows of type ``row``, in order; a name repeated within a group starts a new row, so
    nothing is overwritten. ``axis_of`` gives a record's axis (default: its step key's, else
    ``<prefix>step`` when it has a step)."""
    rows: list[R] = []
    current: R | None = None
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
            current = row(axis, step, record.timestamp, first_seq=record.seq)
            rows.append(current)
        current.values[record.name] = record.value
    return rows


def new_definitions(
    rows: Iterable[StepRow], axes: set[str], metric_axis: dict[str, str]
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


class AxisDefinitions:
    """The axes and metric -> axis pairs told to one tracker run so far."""

    def __init__(self) -> None:
        self.axes: set[str] = set()
        self.metric_axis: dict[str, str] = {}

    def define(
        self,
        rows: Iterable[StepRow],
        define_metric: Callable[[str, str], Any],
        define_axis: Callable[[str], Any] | None = None,
    ) -> None:
        """Tell the tracker the axes (``define_axis``, if it wants them) and the metric -> axis
        pairs that ``rows`` use for the first time; a definition that fails is forgotten, so
        that the retry of the same records defines it again."""
        axes, pairs = new_definitions(rows, self.axes, self.metric_axis)
        try:
            if define_axis is not None:
                for axis in axes:
                    define_axis(axis)
            for name, axis in pairs:
                define_metric(name, axis)
        except Exception:
            for axis in axes:
                self.axes.discard(axis)
            for name, _ in pairs:
                self.metric_axis.pop(name, None)
            raise


class RowRetry:
    """How far a failing batch got: its retry (the same records) starts at the first row not
    logged, so no row is logged twice."""

    def __init__(self) -> None:
        self._partial: tuple[Any, int] | None = None

    def pending(self, records: Sequence[MetricRecord], rows: Sequence[R]) -> Iterator[R]:
        """The rows of ``records`` still to log, in order; iterate on only after the row before
        was logged."""
        batch = (records[0].seq, records[-1].seq, len(records)) if records else None
        done = self._partial[1] if self._partial and self._partial[0] == batch else 0
        for i, row in enumerate(rows[done:], start=done):
            yield row
            self._partial = (batch, i + 1)
        self._partial = None
