"""The tensorboard backend instance: one synchronous event file per role subdirectory.

Why not ``SummaryWriter``: its ``flush()`` flushes the file but not the queue its background
thread drains, so data can still be in memory when ``flush()`` returns, and a backend that returns
from ``log_metrics`` has acknowledged the batch. This backend therefore writes tensorboardX's
protocol buffers through tensorboardX's synchronous ``EventsWriter`` (the writer under
``SummaryWriter``'s thread) and flushes it, which also fsyncs, before returning. Its ``add_hparams``
is not used either: it writes each call into a new ``<logdir>/<timestamp>`` run apart from the
scalars it describes, marks the session finished at once, and writes an experiment summary, and
the HParams dashboard shows only the first experiment summary it finds, i.e. one role's columns.
Here each role's subdirectory carries its own HParams session start info (no experiment summary),
so the dashboard builds its columns from every role's hparams and its metrics from each role's
scalars, and ``close_run`` ends the session with the run's status.

Column order: TensorBoard orders the HParams columns itself (its backend sorts them by "values
differ between sessions" first, then by name; its dashboard shows the first five and hides the
rest behind checkboxes), and with no experiment summary it works out "differ" anew at every
request, from the sessions on disk then: a role whose config arrives late is compared as soon as
it is there, with nothing to rewrite at close. So the columns that differ between roles
(``lr``) come first by TensorBoard's own rule, once the per-launch values that differ between
any two processes (ports, run ids, pids, hosts) are not columns at all
(:mod:`tracking_tensorboardx.hparams`); those stay in the config text.

Steps: TensorBoard keeps a step per series, so a record's ``step`` is its x value whatever axis
(``step_key``) it counts on; ``train/*`` and ``rollout/*`` each plot against their own steps. A
record without a step gets one past the last step this process wrote for that tag (0 for the
first), the way W&B numbers rows without a step.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tensorboardX.event_file_writer import EventsWriter
from tensorboardX.proto import api_pb2
from tensorboardX.proto.event_pb2 import Event
from tensorboardX.proto.plugin_hparams_pb2 import (
    HParamsPluginData,
    SessionEndInfo,
    SessionStartInfo,
)
from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboardX.summary import text as text_summary

from tracking_core.config import LAUNCH, config_text
from tracking_core.names import path_part
from tracking_core.plugin_api import (
    ArtifactRecord,
    ConfigSection,
    HistogramRecord,
    MetricRecord,
    RunContext,
    RunStatus,
    TableRecord,
    TextRecord,
    hookimpl,
)

from . import media
from .hparams import session_hparams
from .logdir import default_logdir
from .logdir import target as run_target

log = logging.getLogger("tracking_core.backends.tensorboard")

#: The TensorBoard run of the primary (the launch config and the driver's own metrics), named
#: like the launch config's namespace, which no role may take.
PRIMARY_RUN = LAUNCH
#: Text tag of a namespace's complete config: ``config/launch``, ``config/actor``.
CONFIG_TAG = "config/{namespace}"

HPARAMS_PLUGIN = "hparams"
SESSION_START_TAG = "_hparams_/session_start_info"
SESSION_END_TAG = "_hparams_/session_end_info"
STATUS = {
    RunStatus.FINISHED: api_pb2.Status.Value("STATUS_SUCCESS"),
    RunStatus.FAILED: api_pb2.Status.Value("STATUS_FAILURE"),
    # HParams has no "killed" status; a killed run did not succeed.
    RunStatus.KILLED: api_pb2.Status.Value("STATUS_FAILURE"),
}

_file_ids = itertools.count()


def run_subdir(role: str | None) -> str:
    """The TensorBoard run (subdirectory) a role writes: ``launch`` for the primary, the role as
    a file name (:func:`tracking_core.names.path_part`) for the others."""
    return PRIMARY_RUN if role is None else path_part(role, "role")


def _hparam_value(value: Any, into: Any) -> bool:
    """Set a ``google.protobuf.Value`` from a scalar; False for what HParams cannot hold."""
    if isinstance(value, bool):
        into.bool_value = value
    elif isinstance(value, (int, float)):
        try:
            into.number_value = float(value)
        except OverflowError:  # an int beyond a double's range: the config text has it
            return False
    elif isinstance(value, str):
        into.string_value = value
    else:
        return False
    return True


def _hparams_summary(tag: str, data: HParamsPluginData) -> Summary:
    data.version = 0
    metadata = SummaryMetadata(
        plugin_data=SummaryMetadata.PluginData(
            plugin_name=HPARAMS_PLUGIN, content=data.SerializeToString()
        )
    )
    return Summary(value=[Summary.Value(tag=tag, metadata=metadata)])


class RoleWriter:
    """One event file in one TensorBoard run directory, written synchronously.

    The file name carries host, pid and a per-process counter: tensorboardX names files by the
    second and host only and opens them for writing, so two writers started in the same second
    (a primary and its resume, two roles' processes on one host) would otherwise truncate each
    other's file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        suffix = f".{os.getpid()}.{next(_file_ids)}"
        self._writer = EventsWriter(os.path.join(path, "events"), suffix)
        self.session_started = False

    def write(self, events: Sequence[Event]) -> None:
        for event in events:
            self._writer.write_event(event)
        self._writer.flush()  # flushes and fsyncs: acknowledged data is on disk

    def close(self) -> None:
        self._writer.close()


class TensorBoardBackend:
    """The run as this process writes it: one :class:`RoleWriter` per TensorBoard run it touches
    (normally only its own role's), opened on first use."""

    def __init__(self, run: RunContext) -> None:
        self.logdir: Path | None = None
        self._writers: dict[str, RoleWriter] = {}
        self._last_step: dict[tuple[str, str], int] = {}
        self._text_steps: dict[tuple[str, str], int] = {}

    # -- helpers ---------------------------------------------------------------------------------
    def _writer(self, subdir: str) -> RoleWriter:
        writer = self._writers.get(subdir)
        if writer is None:
            assert self.logdir is not None, "open_run or attach_run comes first"
            writer = self._writers[subdir] = RoleWriter(self.logdir / subdir)
        return writer

    def _steps(
        self, records: Sequence[MetricRecord]
    ) -> tuple[list[int], dict[tuple[str, str], int]]:
        """Each record's step, and the per-tag last steps to keep once the batch is written."""
        last: dict[tuple[str, str], int] = {}
        steps = []
        for r in records:
            key = (run_subdir(r.role), r.key)
            prev = last.get(key, self._last_step.get(key))
            if r.step is not None:
                step = int(r.step)
            else:
                step = 0 if prev is None else prev + 1
            steps.append(step)
            last[key] = step if prev is None else max(prev, step)
        return steps, last

    # -- lifecycle -------------------------------------------------------------------------------
    @hookimpl
    def open_run(self, run: RunContext, target: Mapping[str, Any] | None) -> dict[str, Any]:
        """Write where ``target`` says (:func:`tracking_tensorboardx.logdir.target`, decided
        when the run started), never where this process would decide now."""
        where = target if target and target.get("logdir") else run_target(run)
        self.logdir = Path(str(where["logdir"]))
        self.logdir.mkdir(parents=True, exist_ok=True)
        from tracking_core.plugin_api import runnable

        log.info(
            "TensorBoard: run %s writes to %s (%s --logdir %s)",
            run.run_id,
            self.logdir,
            runnable("tensorboard"),
            self.logdir,
        )
        return {"logdir": str(self.logdir)}

    @hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> dict[str, Any]:
        """Write into the log directory of the handle entry (the target is all it needs)."""
        logdir = attach.get("logdir")
        if logdir:
            self.logdir = Path(logdir)
        else:
            self.logdir = default_logdir(run)
            log.warning(
                "the run handle has no TensorBoard log dir for run %s; %s writes to %s",
                run.run_id,
                run.label,
                self.logdir,
            )
        self.logdir.mkdir(parents=True, exist_ok=True)
        return {"logdir": str(self.logdir)}

    @hookimpl
    def log_config(self, config: ConfigSection, role: str | None) -> None:
        subdir = run_subdir(role)
        writer = self._writer(subdir)
        now = time.time()
        events = []
        # Unprefixed keys: the TensorBoard run is the role, so one column compares the roles.
        # Keys left out (null, nested) are named in the shaping function's message and are
        # in the config text below, with their prefixed names.
        hparams, _left_out = session_hparams(config)
        start = SessionStartInfo(start_time_secs=now)
        for name, value in hparams.items():
            if not _hparam_value(value, start.hparams[name]):
                del start.hparams[name]
                log.warning(
                    "TensorBoard: hparam %r of %r has unsupported type %s; it is only in the "
                    "config text",
                    name,
                    config.namespace,
                    type(value).__name__,
                )
        # TensorBoard keeps the first session start info of a run: a later one (a re-logged
        # or changed config) would be ignored, so a changed value is recorded by the text only.
        if start.hparams and not writer.session_started:
            data = HParamsPluginData(session_start_info=start)
            summary = _hparams_summary(SESSION_START_TAG, data)
            events.append(Event(wall_time=now, step=0, summary=summary))
        tag = CONFIG_TAG.format(namespace=config.namespace)
        text_key = (subdir, tag)
        text_step = self._text_steps.get(text_key, 0)
        body = text_summary(tag, config_text(config))
        body.value[0].tag = tag  # tensorboardX appends "/text_summary"; keep the tag as named
        events.append(Event(wall_time=now, step=text_step, summary=body))
        writer.write(events)
        writer.session_started = writer.session_started or bool(start.hparams)
        self._text_steps[text_key] = text_step + 1

    @hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        steps, last = self._steps(records)
        batches: dict[str, list[Event]] = {}
        current: dict[str, tuple[int, float, Event]] = {}
        for record, step in zip(records, steps, strict=True):
            subdir = run_subdir(record.role)
            value = Summary.Value(tag=record.key, simple_value=record.value)
            open_event = current.get(subdir)
            # Records of one log call share step and timestamp: one event holds them all.
            if open_event is not None and open_event[:2] == (step, record.timestamp):
                open_event[2].summary.value.append(value)
                continue
            event = Event(wall_time=record.timestamp, step=step, summary=Summary(value=[value]))
            current[subdir] = (step, record.timestamp, event)
            batches.setdefault(subdir, []).append(event)
        for subdir, events in batches.items():
            self._writer(subdir).write(events)
        self._last_step.update(last)

    # -- tables, histograms, texts, artifacts (see tracking_tensorboardx.media) -----------------
    @hookimpl
    def log_table(self, table: TableRecord) -> None:
        media.log_table(self, table)

    @hookimpl
    def log_histogram(self, histogram: HistogramRecord) -> None:
        media.log_histogram(self, histogram)

    @hookimpl
    def log_text(self, text: TextRecord) -> None:
        media.log_text(self, text)

    @hookimpl
    def log_artifact(self, artifact: ArtifactRecord) -> None:
        media.log_artifact(self, artifact)

    @hookimpl
    def close_run(self, status: RunStatus) -> None:
        """End each HParams session this process started with ``status`` and close the files.

        A secondary ends its own role's session only: in TensorBoard each role is its own run,
        and the job's other runs stay open until their writers close.
        """
        end = SessionEndInfo(status=STATUS.get(status, 0), end_time_secs=time.time())
        writers, self._writers = self._writers, {}
        error: Exception | None = None
        for writer in writers.values():
            try:
                if writer.session_started:
                    data = HParamsPluginData(session_end_info=end)
                    summary = _hparams_summary(SESSION_END_TAG, data)
                    writer.write([Event(wall_time=time.time(), step=0, summary=summary)])
            except Exception as exc:  # noqa: BLE001 - close every file, then report
                error = error or exc
            finally:
                writer.close()
        if error is not None:
            raise error
