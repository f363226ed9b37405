"""The ``trackio`` backend instance: writes the job's trackio run through trackio's own storage.

**Why the store and not ``trackio.init``.** A ``trackio.Run`` keeps its whole config in memory and
writes it with its first log (``INSERT OR REPLACE`` of the run's one ``configs`` row), so several
writers of one run would each replace the others' config; it also swallows write errors (a
warning, the batch lost), which would acknowledge records that were never stored. This backend
therefore writes exactly what ``trackio.Run``'s own local sender writes, with the same code:
``SQLiteStorage.bulk_log`` for metric rows (cross-process file lock, one transaction per batch,
errors raised), and the run's ``configs`` row merged under trackio's project lock, so every
writer's keys add up. ``trackio show`` and ``SQLiteStorage``'s readers see an ordinary run.

**One run per job.** The trackio run id is the job's run id and its name the target's ``run``;
every writer of the job, on one node (trackio's store is a local SQLite file), writes that run.
The primary creates the run's config row when it opens; a role's writer attaches only once that
row exists (else ``RunNotOpenYet``: its records wait and the attach is tried again).

**Config.** Flat ``<role>/key`` params merged into the run's config (trackio's ``_Created`` and
``_Group`` beside them); a changed value replaces the old one. The complete namespace (values and
the pipeline's report) is kept under ``tracking_core/config/<namespace>`` as one JSON text.

**Metrics.** One trackio row per logged row (the record's step is the row's step, its axis logged
as a value too, ``actor/train/step``); the row's ``log_id`` is derived from the records, so a
retried or replayed batch is stored once (trackio's unique ``log_id`` index). Keys trackio reserves
(``step``, ``time``, ...) are renamed as trackio itself does (``__step``), once with a warning.

**Rich kinds**, each trackio's own value type, in a row of its own at the record's step: a table
is a ``trackio.Table`` (the dashboard's table view), a histogram a ``trackio.Histogram`` of its
bins (plus its summary, ``<key>/count``, ``/mean``, ``/min``, ``/max``, percentiles, in the same
row), a text a ``trackio.Markdown``. Artifacts are not stored by this backend: trackio's artifacts
belong to its registry, so the core's note (name, kind, size, SHA-256, where the file was) is
logged instead.

**Status.** trackio has no run state: the primary stores it in the run's config as
``tracking_core/status`` (``RUNNING`` while open, then FINISHED, FAILED or KILLED) and, for FAILED or
KILLED, posts a trackio alert (level ``error``) that the dashboard shows.

``TRACKIO_DIR`` is read by trackio once, when it is imported: this module imports trackio only
when a run opens, with ``TRACKIO_DIR`` set to the target's directory. A process that imported
trackio earlier with another directory cannot write there; that is a clear error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tracking_core.config import config_json
from tracking_core.plugin_api import (
    ConfigSection,
    HistogramRecord,
    MetricRecord,
    RunContext,
    RunNotOpenYet,
    RunStatus,
    TableRecord,
    TextRecord,
    hookimpl,
)
from tracking_core.rows import StepRow, metric_rows

from .options import show_command
from .options import target as run_target

log = logging.getLogger("tracking_core.backends.trackio")

STATUS_KEY = "tracking_core/status"
CONFIG_PREFIX = "tracking_core/config/"
_import_lock = threading.Lock()
_warned: set[str] = set()


def load_storage(directory: Path) -> Any:
    """trackio's ``SQLiteStorage``, with trackio's data directory ``directory``.

    trackio fixes its directory (``TRACKIO_DIR``) when it is first imported, so it is imported
    here with the variable set (and the variable restored afterwards)."""
    with _import_lock:
        fresh = "trackio.utils" not in sys.modules
        if fresh:
            saved = os.environ.get("TRACKIO_DIR")
            os.environ["TRACKIO_DIR"] = str(directory)
            try:
                from trackio import utils
                from trackio.sqlite_storage import SQLiteStorage
            finally:
                if saved is None:
                    os.environ.pop("TRACKIO_DIR", None)
                else:
                    os.environ["TRACKIO_DIR"] = saved
        else:
            from trackio import utils
            from trackio.sqlite_storage import SQLiteStorage
    current = Path(utils.TRACKIO_DIR).expanduser().absolute()
    if current != Path(directory).absolute():
        raise RuntimeError(
            f"trackio was imported in this process before the run opened, with its data directory "
            f"{current}; the run's trackio data goes to {directory}: deliver from a helper process "
            f"(--tracking-delivery process, the default), or set TRACKIO_DIR={directory} before "
            "trackio is imported"
        )
    return SQLiteStorage


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat()


def _warn_once(key: str, msg: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(msg, *args)


def _step_key_axis(record: MetricRecord) -> str | None:
    """A record's axis in trackio: its step key's (a row has its own step without one)."""
    return record.axis


class TrackioBackend:
    """One process's writer of the job's trackio run; called by one worker thread at a time."""

    def __init__(self, run: RunContext) -> None:
        self.context = run
        self.entry: dict[str, Any] | None = None
        self.storage: Any = None
        self._reserved: tuple[str, ...] = ()

    # -- the run's config row ----------------------------------------------------------------
    def _connect(self, entry: Mapping[str, Any]) -> None:
        self.storage = load_storage(Path(str(entry["dir"])))
        from trackio import utils

        self._reserved = tuple(getattr(utils, "RESERVED_KEYS", ()))
        self.entry = dict(entry)

    def _read_config(self, conn: Any) -> dict[str, Any] | None:
        assert self.entry is not None
        row = conn.execute(
            "SELECT config FROM configs WHERE run_id = ?", (self.entry["run_id"],)
        ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def _update_config(self, values: Mapping[str, Any], *, create: bool = False) -> None:
        """Merge ``values`` into the run's config row, under trackio's project lock (the row is
        created only when ``create``); raises :class:`RunNotOpenYet` when there is no row."""
        assert self.entry is not None
        storage, entry = self.storage, self.entry
        db_path = storage.init_db(entry["project"])
        with storage._get_process_lock(entry["project"]):
            with storage._get_connection(db_path) as conn:
                config = self._read_config(conn)
                if config is None and not create:
                    raise RunNotOpenYet(
                        f"trackio run {entry['run_id']} is not open yet in project {entry['project']}"
                    )
                merged = dict(config or {"_Created": _now(), "_Group": entry.get("group")})
                merged.update(values)
                from trackio.utils import serialize_values

                conn.execute(
                    "INSERT OR REPLACE INTO configs (run_id, run_name, config, created_at) "
                    "VALUES (?, ?, ?, ?)",
                    (entry["run_id"], entry["run"], json.dumps(serialize_values(merged)), _now()),
                )
                conn.commit()

    # -- opening -------------------------------------------------------------------------------
    @hookimpl
    def open_run(self, run: RunContext, target: Mapping[str, Any] | None) -> dict[str, Any]:
        """Open the job's trackio run where ``target`` says (project, run, run id, group, dir)."""
        entry = dict(target) if target else run_target(run)
        self._connect(entry)
        self._update_config({STATUS_KEY: "RUNNING"}, create=True)
        log.info("trackio run %s (%s); open it with: %s", entry["run"], entry["run_id"], show_command(entry))
        return entry

    @hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> dict[str, Any]:
        """Write the job's run as a role (or a resuming primary): the run must exist (the
        primary's open created it), else ``RunNotOpenYet`` and the attach is tried again."""
        entry = {**run_target(run), **dict(attach)}
        self._connect(entry)
        if run.primary:
            self._update_config({STATUS_KEY: "RUNNING"}, create=True)
        else:
            self._update_config({})
        return entry

    # -- config --------------------------------------------------------------------------------
    @hookimpl
    def log_config(self, config: ConfigSection, role: str | None) -> None:
        values: dict[str, Any] = {}
        for key, value in config.params.items():
            if str(key).startswith("_"):
                _warn_once(
                    f"config:{key}",
                    "trackio keeps config keys starting with '_' for itself; %r is stored as %r",
                    key,
                    "config" + str(key),
                )
                key = "config" + str(key)
            values[key] = value
        # The lossless document, compact: trackio's dashboard shows it as one text value.
        values[CONFIG_PREFIX + config.namespace] = json.dumps(json.loads(config_json(config)), sort_keys=True)
        self._update_config(values)

    # -- metrics -------------------------------------------------------------------------------
    def _name(self, key: str) -> str:
        if key in self._reserved or key.startswith("__"):
            _warn_once(
                f"metric:{key}",
                "trackio reserves the metric name %r; it is stored as %r (trackio's own rule)",
                key,
                f"__{key}",
            )
            return f"__{key}"
        return key

    def _log_id(self, row: StepRow) -> str:
        run = self.context
        seed = f"{run.run_id}|{run.role or ''}|{row.first_seq}|{row.timestamp!r}|{len(row.values)}"
        return hashlib.sha1(seed.encode()).hexdigest()

    @hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        if self.entry is None:
            raise RuntimeError("the trackio run is not open in this process (open or attach failed)")
        rows = metric_rows(records, axis_of=_step_key_axis)
        metrics_list, steps, stamps, ids = [], [], [], []
        for row in rows:
            values = {self._name(k): v for k, v in row.values.items()}
            if row.axis is not None and row.step is not None and row.axis not in self._reserved:
                values[self._name(row.axis)] = row.step
            metrics_list.append(values)
            steps.append(row.step)
            stamps.append(_iso(row.timestamp))
            ids.append(self._log_id(row))
        entry = self.entry
        self.storage.bulk_log(
            project=entry["project"],
            run=entry["run"],
            run_id=entry["run_id"],
            metrics_list=metrics_list,
            steps=steps,
            timestamps=stamps,
            log_ids=ids,
        )

    # -- rich kinds ----------------------------------------------------------------------------
    def _log_value(self, record: Any, values: Mapping[str, Any]) -> None:
        """One row holding ``values`` at ``record``'s step (its axis too), stored once."""
        if self.entry is None:
            raise RuntimeError("the trackio run is not open in this process (open or attach failed)")
        row = dict(values)
        if record.axis is not None and record.step is not None and record.axis not in self._reserved:
            row[self._name(record.axis)] = record.step
        seed = f"{self.context.run_id}|{self.context.role or ''}|{record.seq}|{record.timestamp!r}|{record.name}"
        entry = self.entry
        self.storage.bulk_log(
            project=entry["project"], run=entry["run"], run_id=entry["run_id"], metrics_list=[row],
            steps=[None if record.step is None else int(record.step)],
            timestamps=[_iso(record.timestamp)], log_ids=[hashlib.sha1(seed.encode()).hexdigest()],
        )

    @hookimpl
    def log_table(self, table: TableRecord) -> None:
        from trackio import Table

        value = Table(columns=list(table.columns), data=[list(r) for r in table.rows])
        assert self.entry is not None
        self._log_value(table, {
            self._name(table.name): value._to_dict(project=self.entry["project"], run=self.entry["run"], step=table.step or 0)
        })

    @hookimpl
    def log_histogram(self, histogram: HistogramRecord) -> None:
        from trackio import Histogram

        value = Histogram(np_histogram=(list(histogram.counts), list(histogram.edges)))
        row: dict[str, Any] = {self._name(histogram.name): value._to_dict()}
        row.update({f"{histogram.name}/{k}": float(v) for k, v in histogram.summary().items()})
        self._log_value(histogram, row)

    @hookimpl
    def log_text(self, text: TextRecord) -> None:
        from trackio import Markdown

        self._log_value(text, {self._name(text.name): Markdown(text.text)._to_dict()})

    # -- closing -------------------------------------------------------------------------------
    @hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        """The primary records the run's status (config key ``tracking_core/status``; an error
        alert for FAILED or KILLED); a role's writer has nothing to close."""
        if self.entry is None or not run.primary:
            return
        status = RunStatus(status)
        self._update_config({STATUS_KEY: status.value})
        if status is not RunStatus.FINISHED:
            entry = self.entry
            self.storage.bulk_alert(
                project=entry["project"],
                run=entry["run"],
                run_id=entry["run_id"],
                titles=[f"run {status.value.lower()}"],
                texts=[f"tracking-core: run {run.run_id} ended {status.value}"],
                levels=["error"],
                steps=[None],
                alert_ids=[f"{entry['run_id']}-{status.value}"],
            )
