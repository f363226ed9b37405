"""The MLflow backend instance: one ``MlflowClient`` per process, one run per job.

Imported only when the ``mlflow`` backend is selected (it imports mlflow, ~1.5 s). Each instance
is called alone from its own worker thread (see :mod:`tracking_core.hookspecs`), so it holds plain
state without locks. It uses ``MlflowClient`` with an explicit tracking URI and run id, never
MLflow's fluent API: that keeps one global "active run" per process, and a process may hold
several runs (a driver that is also an actor, tests).

**The embedded SQLite store** is written by several processes at once (the driver and each
role's writer). Measured with MLflow 3.17: MLflow already sets ``PRAGMA busy_timeout = 20000`` on
every session, and four processes logging 1000-metric batches concurrently saw no "database is
locked" error; a writer blocked for more than 20 s gets ``MlflowException`` with
``TEMPORARILY_UNAVAILABLE`` and "database is locked", which this backend retries a few times
before letting the worker's own retry take over. What does break is *creating* a store: four
processes that open a fresh database at once all run MLflow's migrations and leave a database no
process can open again. The first connection of each process to a SQLite store therefore runs
under an exclusive file lock (``mlflow.db.init-lock`` next to the database).
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import os
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from tracking_core.config import artifact_path, config_json
from tracking_core.plugin_api import (
    ArtifactRecord,
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

from . import settings
from .keys import MlflowKeyShaper, mlflow_key, mlflow_params, mlflow_tag_key
from .media import MlflowMedia
from .views import RUN_ID_TAG

settings.apply_env_defaults()

from mlflow.entities import Metric, Param, RunTag  # noqa: E402
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

log = logging.getLogger("tracking_core.mlflow")

T = TypeVar("T")

#: The experiment tag that makes MLflow's UI show an experiment as model training.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
#: Prefix of the tags that record a changed config value (``config_changed/<key>``).
CHANGED_TAG = "config_changed/"
#: Prefix of the tags that map a shaped metric key back to the key that was logged.
METRIC_KEY_TAG = "tracking_core.metric_key/"
#: Prefix of the writer registry's tags: ``tracking_core.writer.<label>`` = the writer's state.
WRITER_TAG = "tracking_core.writer."
#: Who still owes data (set by a primary that closed the run FAILED because of them: how many,
#: where their lines are, the first lines that fit) and the status it meant: restored, and the
#: first removed, once every writer named is complete.
INCOMPLETE_TAG = "tracking_core.incomplete"
INTENDED_TAG = "tracking_core.intended_status"
#: One tag per writer so named, ``tracking_core.owing.<id>`` (:func:`_owing_key`) = its line (who,
#: what, the command), removed once that writer's own tag says it is complete.
OWING_TAG = "tracking_core.owing."
#: The most characters of one writer's line.
MAX_LINE = 1000
#: The most characters each string of a writer's tag takes in its JSON (any other: 100): the
#: tag stays within :data:`MAX_REGISTRY_TAG` whatever its strings, and is never cut.
REGISTRY_FIELDS = {"label": 300, "role": 300, "host": 300, "tracking_dir": 2000, "sync": 1500}
#: Tags in one ``log_batch`` (MLflow's limit).
MAX_TAGS_PER_REQUEST = 100
MAX_METRICS_PER_REQUEST = 1000
MAX_TAG_VALUE = 8000
#: What MLflow servers before 2.x take in a tag value: the registry's tags stay within it.
MAX_REGISTRY_TAG = 5000
#: Extra tries for a SQLite store that stayed locked past MLflow's own 20 s busy timeout.
LOCKED_RETRIES = 2

_TERMINAL = {"FINISHED", "FAILED", "KILLED"}


def _is_locked(exc: BaseException) -> bool:
    return isinstance(exc, MlflowException) and "database is locked" in str(exc)


def _error_code(exc: BaseException) -> str | None:
    return getattr(exc, "error_code", None)


def _beside(config: ConfigSection, suffix: str) -> str:
    """An artifact beside the section's JSON: ``config/<namespace>.<suffix>`` (the namespace as
    a file name, as in :func:`tracking_core.config.artifact_path`)."""
    return artifact_path(config).removesuffix(".json") + "." + suffix


def _is_axis_point(record: MetricRecord) -> bool:
    """Whether ``record`` is its step axis's own value at its own step (``train/step`` = 7 at
    step 7 on ``train/step``): MLflow holds that as the step of the axis's metrics."""
    return (
        record.step_key is not None
        and record.key == record.step_key
        and record.step is not None
        and float(record.value) == float(record.step)
    )


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = f" …[{len(text)} chars]"
    return text[: limit - len(marker)] + marker


class MlflowBackend:
    """One process's view of the job's MLflow run (see the package docstring for the contract)."""

    def __init__(self, run: RunContext) -> None:
        self.context = run
        self.client: MlflowClient | None = None
        self.tracking_uri: str | None = None
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self.experiment_name: str | None = None
        self._shape = MlflowKeyShaper()
        self._tagged_keys: set[str] = set()
        self.media = MlflowMedia(self)
        #: the primary's writer state as the run showed it when this process joined
        self._primary_state: dict[str, Any] | None = None

    # -- connecting ----------------------------------------------------------------------------
    def _connect(self, uri: str) -> MlflowClient:
        """A client for ``uri``; for a SQLite store the first connection (which may create the
        database and run MLflow's migrations) happens under the store's init lock."""
        if self.client is not None and self.tracking_uri == uri:
            return self.client
        path = settings.sqlite_path(uri)
        if path is None:
            client = MlflowClient(tracking_uri=uri)
        else:
            with settings.file_lock(path.with_name(path.name + ".init-lock")):
                client = MlflowClient(tracking_uri=uri)
        self.client, self.tracking_uri = client, uri
        return client

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, retried while a SQLite store stays locked."""
        for attempt in range(LOCKED_RETRIES + 1):
            try:
                return fn(*args, **kwargs)
            except MlflowException as exc:
                if not _is_locked(exc) or attempt == LOCKED_RETRIES:
                    raise
                delay = 0.2 * (2**attempt) * (1 + random.random())
                log.debug("MLflow store locked (%s); retrying in %.1f s", self.tracking_uri, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _need_run(self) -> tuple[MlflowClient, str]:
        if self.client is None or self.run_id is None:
            raise RuntimeError(
                "MLflow backend has no run: open_run or attach_run has not succeeded yet"
            )
        return self.client, self.run_id

    # -- the run -------------------------------------------------------------------------------
    @staticmethod
    def _store(run: RunContext, where: Mapping[str, Any]) -> str:
        """The URI to connect to for a target or handle entry: its own, with the credentials
        this process has for that store (a target never carries them)."""
        uri = where.get("tracking_uri")
        if not uri:
            raise ValueError(
                f"MLflow target {dict(where)!r} has no tracking_uri: the run handle does not say "
                "where the job's MLflow run is (set --mlflow-tracking-uri / $MLFLOW_TRACKING_URI "
                "to the job's store)"
            )
        return settings.attach_uri(run, str(uri))

    def _experiment_id(
        self, client: MlflowClient, run: RunContext, uri: str, where: Mapping[str, Any]
    ) -> str:
        """The experiment the target names, created if it does not exist (primary only)."""
        name, experiment_id = settings.target_experiment(where)
        if experiment_id is not None:
            experiment = self._call(client.get_experiment, experiment_id)
            self.experiment_name = experiment.name
            return self._training_kind(client, experiment)
        assert name is not None
        self.experiment_name = name
        experiment = self._call(client.get_experiment_by_name, name)
        if experiment is None:
            # A local database keeps its artifacts in the tracking directory too; anywhere else
            # the server (or the store's default) decides.
            location = None
            if settings.is_local_database(uri):
                location = settings.embedded_artifacts(run.tracking_dir)
            try:
                # Tagged as model training: MLflow 3's UI opens other experiments in its GenAI view.
                tags = {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}
                return str(
                    self._call(client.create_experiment, name, artifact_location=location, tags=tags)
                )
            except MlflowException as exc:
                if _error_code(exc) != "RESOURCE_ALREADY_EXISTS":
                    raise
                experiment = self._call(client.get_experiment_by_name, name)
                if experiment is None:
                    raise
        _check_not_deleted(experiment)
        return self._training_kind(client, experiment)

    def _training_kind(self, client: MlflowClient, experiment: Any) -> str:
        """The id of ``experiment`` (named by name or id), tagged as model training where it has
        no kind: without the tag MLflow shows it in its GenAI view. A kind already set is left."""
        if EXPERIMENT_KIND_TAG not in (experiment.tags or {}):
            self._call(client.set_experiment_tag, experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return str(experiment.experiment_id)

    def _find_experiment(self, client: MlflowClient, where: Mapping[str, Any]) -> Any:
        """The experiment the target names, or None where it does not exist (never created)."""
        name, experiment_id = settings.target_experiment(where)
        if experiment_id is None:
            return self._call(client.get_experiment_by_name, name)
        try:
            return self._call(client.get_experiment, experiment_id)
        except MlflowException as exc:
            if _error_code(exc) == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise

    def _run_tags(self, run: RunContext, run_name: str) -> dict[str, str]:
        tags: dict[str, str] = {
            "mlflow.runName": run_name,
            "mlflow.source.name": os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "",
            "mlflow.source.type": "LOCAL",
            RUN_ID_TAG: run.run_id,
        }
        try:
            tags["mlflow.user"] = getpass.getuser()
        except Exception:  # noqa: BLE001 - no user name in a container is fine
            pass
        extra = {**dict(run.tags), **settings.parse_tags(run.option("mlflow_tags"))}
        for key, value in extra.items():
            shaped = mlflow_key(str(key))
            if shaped != key:
                log.warning("MLflow: run tag %r is set as %r (MLflow's key rules)", key, shaped)
            if shaped == RUN_ID_TAG:
                log.warning("MLflow: run tag %r is reserved by tracking-core; ignored", key)
                continue
            tags[shaped] = _clip(str(value), MAX_TAG_VALUE)
        return {k: v for k, v in tags.items() if v != ""}

    def _existing_run(self, client: MlflowClient, run: RunContext) -> Any:
        """The MLflow run this job created before (a retried open, a resumed or synced run)."""
        quote = "'" if "'" not in run.run_id else '"'
        if quote in run.run_id:
            return None  # not expressible in a search filter; such an id is never reused anyway
        found = self._call(
            client.search_runs,
            [self.experiment_id],
            filter_string=f"tags.`{RUN_ID_TAG}` = {quote}{run.run_id}{quote}",
            max_results=1,
        )
        return found[0] if found else None

    def _handle_entry(self) -> dict[str, Any]:
        assert self.tracking_uri is not None
        return {
            "tracking_uri": settings.public_uri(self.tracking_uri),
            "run_id": self.run_id,
            "experiment_id": self.experiment_id,
            "experiment": self.experiment_name,
        }

    @hookimpl
    def open_run(self, run: RunContext, target: Mapping[str, Any] | None) -> dict[str, Any]:
        """Create the job's run where ``target`` says (:func:`tracking_mlflow.settings.target`,
        computed when the run started), or find the one this job created there before, and
        return the handle entry (the target's fields, the run id and the experiment's id and
        name). Where this process's environment points does not matter. Safe to call again after
        a failure: it never creates a second run for the job."""
        where = target if target else settings.target(run)
        uri = self._store(run, where)
        client = self._connect(uri)
        if self.run_id is None:
            self.experiment_id = self._experiment_id(client, run, uri, where)
            existing = self._existing_run(client, run)
            if existing is not None:
                self.run_id = existing.info.run_id
                self.media.seed(self.run_id, existing.data.tags)
                self._reopen(client, existing.info.status)
            else:
                tags = self._run_tags(run, str(run.option("mlflow_run_name") or run.name))
                created = self._call(
                    client.create_run,
                    self.experiment_id,
                    tags=tags,
                    run_name=tags["mlflow.runName"],
                    start_time=_ms(run.started_at),
                )
                self.run_id = created.info.run_id
                self.media.seed(self.run_id, created.data.tags)
        log.info(
            "MLflow: run %s (experiment %r, id %s) at %s; %s",
            self.run_id,
            self.experiment_name,
            self.experiment_id,
            settings.public_uri(uri),
            _view_hint(uri, self.experiment_id, self.run_id),
        )
        return self._handle_entry()

    def _reopen(self, client: MlflowClient, status: str) -> None:
        if status in _TERMINAL:
            assert self.run_id is not None
            self._call(client.update_run, self.run_id, status="RUNNING")

    @hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> dict[str, Any] | None:
        """Join the job's run named by ``attach``, the handle entry; a secondary never creates
        one. A primary that resumes the run sets it RUNNING again; a secondary records which
        process writes its role.

        ``attach`` may be only the target (no ``run_id``: the primary's open has not been
        reported yet). A secondary then finds the run by its tag ``tracking_core.run_id`` in the
        target's experiment and returns the full entry, or raises :class:`RunNotOpenYet` while
        the primary has not created it (the caller retries); a primary resuming opens it there
        (idempotently: :meth:`open_run` finds its run by the same tag)."""
        run_id = attach.get("run_id")
        if not run_id:
            if run.primary:
                return self.open_run(run, attach)
            return self._attach_by_tag(run, attach)
        client = self._connect(self._store(run, attach))
        found = self._call(client.get_run, str(run_id))
        self.run_id = found.info.run_id
        self.media.seed(self.run_id, found.data.tags)
        self._primary_state = _primary_writer(found.data.tags)
        self.experiment_id = found.info.experiment_id
        self.experiment_name = attach.get("experiment")
        if run.primary:
            self._reopen(client, found.info.status)
            return self._handle_entry()
        return None

    def _attach_by_tag(self, run: RunContext, where: Mapping[str, Any]) -> dict[str, Any]:
        uri = self._store(run, where)
        client = self._connect(uri)
        name, experiment_id = settings.target_experiment(where)
        experiment = self._find_experiment(client, where)
        if experiment is not None:
            _check_not_deleted(experiment)
            self.experiment_id = str(experiment.experiment_id)
            self.experiment_name = experiment.name
            found = self._existing_run(client, run)
        else:
            found = None
        if found is None:
            raise RunNotOpenYet(
                f"MLflow: the job's run {run.run_id!r} is not open yet in experiment "
                f"{name or experiment_id!r} at {settings.public_uri(uri)} (no run tagged "
                f"{RUN_ID_TAG}={run.run_id}): the primary has not created it; {run.label} never "
                "creates it and tries again"
            )
        self.run_id = found.info.run_id
        self.media.seed(self.run_id, found.data.tags)
        self._primary_state = _primary_writer(found.data.tags)
        return self._handle_entry()

    # -- config --------------------------------------------------------------------------------
    @hookimpl
    def log_config(self, config: ConfigSection, role: str | None) -> None:
        """Params (new ones only; a changed value is recorded, never raised) and the namespace's
        complete JSON artifact."""
        client, run_id = self._need_run()
        shaped = mlflow_params(config)
        changed: dict[str, dict[str, str]] = {}
        for _ in range(3):
            existing = self._call(client.get_run, run_id).data.params
            new = {k: v for k, v in shaped.params.items() if k not in existing}
            changed = {
                k: {"logged": existing[k], "new": v}
                for k, v in shaped.params.items()
                if k in existing and existing[k] != v
            }
            try:
                for batch in replace(shaped, params=new).batches():
                    params = [Param(k, v) for k, v in batch.items()]
                    self._call(client.log_batch, run_id, params=params)
                break
            except MlflowException as exc:
                # Another writer logged one of these keys between the read and the write.
                if "Changing param values is not allowed" not in str(exc):
                    raise
        else:
            raise RuntimeError(f"MLflow params of {config.namespace!r} kept changing under us")
        self._call(client.log_text, run_id, config_json(config), artifact_path(config))
        if shaped.renamed or shaped.truncated:
            doc = {"renamed": shaped.renamed, "truncated": shaped.truncated}
            self._call(
                client.log_text,
                run_id,
                json.dumps(doc, indent=1, sort_keys=True),
                _beside(config, "mlflow-keys.json"),
            )
        if changed:
            self._record_changes(client, run_id, config, changed)

    def _record_changes(
        self,
        client: MlflowClient,
        run_id: str,
        config: ConfigSection,
        changed: Mapping[str, Mapping[str, str]],
    ) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        where = _beside(config, f"changes-{stamp}.json")
        tags = [
            RunTag(mlflow_tag_key(CHANGED_TAG + key), self._change_tag(values, where))
            for key, values in changed.items()
        ]
        self._call(client.log_batch, run_id, tags=tags)
        doc = {"namespace": config.namespace, "by": self.context.label, "changed": changed}
        self._call(client.log_text, run_id, json.dumps(doc, indent=1, sort_keys=True), where)
        log.warning(
            "MLflow: %d %s config value(s) differ from the params already logged in run %s; "
            "MLflow params cannot change, so they keep their first value and the new values are "
            "in the tags %s* and the artifact %s: %s",
            len(changed),
            config.namespace,
            run_id,
            CHANGED_TAG,
            where,
            ", ".join(sorted(changed)),
        )

    def _change_tag(self, values: Mapping[str, str], where: str) -> str:
        """``{"logged", "new", "by", "full"}`` as JSON within MLflow's tag length; long values are
        clipped here (the artifact ``where`` has them whole)."""
        for limit in (3000, 1000, 200):
            text = json.dumps(
                {
                    "logged": _clip(values["logged"], limit),
                    "new": _clip(values["new"], limit),
                    "by": self.context.label,
                    "full": where,
                },
                sort_keys=True,
                ensure_ascii=False,
            )
            if len(text) <= MAX_TAG_VALUE:
                break
        return text

    # -- metrics -------------------------------------------------------------------------------
    def _metrics(self, records: Sequence[MetricRecord]) -> list[Metric]:
        """The batch as MLflow metrics, each at its step.

        The step axis (``train/step``) is each metric's step, MLflow's x-axis: it is no series of
        its own, which MLflow would draw as a chart of a straight line among the losses. A
        record that is its own axis at its own step (slime logs ``train/step`` beside the
        losses) holds nothing its metrics' steps do not, and is not logged either.
        """
        out: dict[tuple[str, int, int, float], Metric] = {}
        for record in records:
            if _is_axis_point(record):
                continue
            step = record.step if record.step is not None else 0
            timestamp = int(record.timestamp * 1000)
            key = self._shape(record.name)
            value = float(record.value)
            out.setdefault((key, timestamp, step, value), Metric(key, value, timestamp, step))
        return list(out.values())

    def _key_tags(self) -> dict[str, RunTag]:
        """A tag per metric key that had to be renamed and is not tagged yet (shaped -> tag)."""
        return {
            shaped: RunTag(mlflow_tag_key(METRIC_KEY_TAG + shaped), _clip(original, MAX_TAG_VALUE))
            for original, shaped in self._shape.renamed.items()
            if shaped not in self._tagged_keys
        }

    @hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        """One ``log_batch`` per 1000 metrics; returning means MLflow stored all of them."""
        client, run_id = self._need_run()
        metrics = self._metrics(records)
        tags = self._key_tags()
        for start in range(0, len(metrics), MAX_METRICS_PER_REQUEST):
            chunk = metrics[start : start + MAX_METRICS_PER_REQUEST]
            self._call(client.log_batch, run_id, metrics=chunk)
        if tags:
            self._call(client.log_batch, run_id, tags=list(tags.values()))
            self._tagged_keys.update(tags)

    # -- tables, histograms, texts, artifacts (see tracking_mlflow.media) -----------------------
    @hookimpl
    def log_table(self, table: TableRecord) -> None:
        self.media.log_table(table)

    @hookimpl
    def log_histogram(self, histogram: HistogramRecord) -> None:
        """The bins as a JSON artifact, the summary as metrics on the same step."""
        self.media.log_histogram(histogram)

    @hookimpl
    def log_text(self, text: TextRecord) -> None:
        self.media.log_text(text)

    @hookimpl
    def log_artifact(self, artifact: ArtifactRecord) -> None:
        self.media.log_artifact(artifact)

    # -- the writer registry -------------------------------------------------------------------
    @hookimpl
    def publish_writer(self, state: Mapping[str, Any]) -> None:
        """The writer's state as the run tag ``tracking_core.writer.<label>`` (compact JSON, never
        longer than a tag holds). A primary's closing state that names writers still owing data
        (``incomplete``: label -> line) also sets a tag per writer named (its line), then
        ``tracking_core.incomplete`` and ``tracking_core.intended_status``; the primary's own tag
        holds how many it named. A complete writer may be the last named: the run then gets its
        intended status back."""
        client, run_id = self._need_run()
        named = {str(label): str(line) for label, line in dict(state.get("incomplete") or {}).items()}
        tags = [RunTag(mlflow_tag_key(WRITER_TAG + str(state["label"])), _registry_json(state, len(named)))]
        if named:
            lines = [RunTag(_owing_key(label), _clip(line, MAX_LINE)) for label, line in named.items()]
            for start in range(0, len(lines), MAX_TAGS_PER_REQUEST):
                self._call(client.log_batch, run_id, tags=lines[start : start + MAX_TAGS_PER_REQUEST])
            intended = str(state.get("intended_status") or "FINISHED")
            # Marked last: a run marked incomplete has every writer's line.
            tags += [RunTag(INCOMPLETE_TAG, _incomplete_text(list(named.values()), intended)), RunTag(INTENDED_TAG, intended)]
        self._call(client.log_batch, run_id, tags=tags)
        if state.get("state") == "complete" and (named or self._may_be_named(state)):
            self._restore_status(client, run_id)

    def _may_be_named(self, state: Mapping[str, Any]) -> bool:
        """Whether a primary may have named this writer as owing data: not when it is the
        primary, nor when the primary (as the run showed it when this process joined) writes on
        the same host into the same tracking directory: a primary leaves those writers to its
        own finish, which waits for them or replays their journals. A single-node job's writers
        thus close with one request."""
        if self.context.primary:
            return False
        primary = self._primary_state
        if not primary or primary.get("host") != state.get("host"):
            return True
        return _same_path(primary.get("tracking_dir"), state.get("tracking_dir")) is not True

    @hookimpl
    def read_writers(self) -> dict[str, dict[str, Any]]:
        """Every writer state on the run, label -> state."""
        client, run_id = self._need_run()
        return _writers(self._call(client.get_run, run_id).data.tags)

    def _restore_status(self, client: MlflowClient, run_id: str) -> None:
        """The run was closed FAILED while writers owed data: remove the tag of each writer named
        whose own tag says it is complete now (one that cannot be read is not), and once none is
        left, set the status the primary meant and remove ``tracking_core.incomplete``."""
        tags = self._call(client.get_run, run_id).data.tags
        if INCOMPLETE_TAG not in tags:
            return
        complete = {_owing_key(label) for label, state in _writers(tags).items() if state.get("state") == "complete"}
        owing = [key for key in tags if key.startswith(OWING_TAG)]
        for key in owing:
            if key in complete:
                self._delete_tag(client, run_id, key)
        if not complete.issuperset(owing):
            return
        intended = tags.get(INTENDED_TAG) or "FINISHED"
        self._call(client.set_terminated, run_id, status=intended if intended in _TERMINAL else "FINISHED")
        self._delete_tag(client, run_id, INCOMPLETE_TAG)
        log.info("MLflow: every writer of run %s is complete now: status %s", run_id, intended)

    def _delete_tag(self, client: MlflowClient, run_id: str, key: str) -> None:
        try:
            self._call(client.delete_tag, run_id, key)
        except MlflowException as exc:
            if _error_code(exc) != "RESOURCE_DOES_NOT_EXIST":  # another writer did it first
                raise

    # -- the end -------------------------------------------------------------------------------
    @hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        """The primary ends the run with ``status``; a secondary has nothing buffered (every call
        above is synchronous) and leaves the run open for the others."""
        if not run.primary:
            return
        client, run_id = self._need_run()
        self._call(client.set_terminated, run_id, status=RunStatus(status).value, end_time=_ms(run.ended_at))


def _ms(at: float | None) -> int | None:
    """Epoch seconds as MLflow's milliseconds (None: MLflow takes now)."""
    return None if at is None else int(at * 1000)


def _registry_json(state: Mapping[str, Any], named: int) -> str:
    """A writer's state as a compact tag value within :data:`MAX_REGISTRY_TAG` by construction:
    each string within its share (:data:`REGISTRY_FIELDS`), a primary's writers named as owing
    data as a count (their lines are tags of their own)."""
    data = {k: _fit(v, REGISTRY_FIELDS.get(k, 100)) for k, v in state.items() if k not in ("incomplete", "intended_status")}
    if named:
        data["incomplete"] = named
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def _fit(value: Any, limit: int) -> Any:
    """A string that takes at most ``limit`` characters in JSON (escapes take up to 6 each);
    anything else as it is (numbers, None)."""
    if not isinstance(value, str):
        return value if value is None or isinstance(value, (bool, int, float)) else _fit(str(value), limit)
    value = _clip(value, limit - 2)
    return value if len(json.dumps(value, ensure_ascii=False)) <= limit else _clip(value, (limit - 2) // 6)


def _owing_key(label: str) -> str:
    """The tag of a writer a primary named as owing data: by a digest of its label (any length)."""
    return OWING_TAG + hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _incomplete_text(lines: list[str], intended: str) -> str:
    """How many writers owe data, where each one's line is, and the first lines that fit."""
    text = (
        f"{len(lines)} writer(s) of the job still owed data when it closed: the run is FAILED until "
        f"each is complete, then {intended}; each one's line is in its tag {OWING_TAG}<id>, removed "
        "when it completes. The first:"
    )
    for shown, line in enumerate(lines):
        more = f"\n... and {len(lines) - shown} more (see the tags {OWING_TAG}*)"
        if len(text) + 1 + len(line) + len(more) > MAX_REGISTRY_TAG:
            return text + more
        text += "\n" + line
    return text


def _primary_writer(tags: Mapping[str, str]) -> dict[str, Any] | None:
    """The newest state a primary published on the run (None: none yet)."""
    primaries = [state for state in _writers(tags).values() if state.get("role") is None]
    return max(primaries, key=lambda state: float(state.get("at") or 0), default=None)


def _same_path(a: Any, b: Any) -> bool | None:
    """Whether two paths name the same directory (None: one is missing)."""
    if not isinstance(a, str) or not isinstance(b, str) or not a or not b:
        return None
    return os.path.realpath(a) == os.path.realpath(b)


def _writers(tags: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The writer registry in a run's tags, label -> state (unreadable values left out)."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in tags.items():
        if not key.startswith(WRITER_TAG):
            continue
        try:
            state = json.loads(value)
        except ValueError:
            continue
        if isinstance(state, dict):
            out[str(state.get("label") or key.removeprefix(WRITER_TAG))] = state
    return out


def _check_not_deleted(experiment: Any) -> None:
    if experiment.lifecycle_stage == "deleted":
        raise RuntimeError(
            f"MLflow experiment {experiment.name!r} (id {experiment.experiment_id}) is deleted: "
            f"restore it (`mlflow experiments restore --experiment-id "
            f"{experiment.experiment_id}`) or choose another with --mlflow-experiment / "
            "$MLFLOW_EXPERIMENT_NAME"
        )


def _view_hint(uri: str, experiment_id: str | None, run_id: str | None) -> str:
    url = settings.run_url(uri, experiment_id, run_id)
    if url is not None:
        return f"view it at {url}"
    from tracking_core.plugin_api import runnable

    path = settings.sqlite_path(uri)
    if path is not None:
        return f"view it with: {runnable('mlflow')} ui --backend-store-uri sqlite:///{path}"
    return f"view it with: {runnable('mlflow')} ui --backend-store-uri {settings.public_uri(uri)}"
