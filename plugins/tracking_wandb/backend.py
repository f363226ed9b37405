"""The ``wandb`` backend instance: the only module of this plugin that imports ``wandb``.

**Runs.** The primary opens the job's run (``reinit="create_new"``, so the host's own W&B runs and
``wandb.run`` are left alone, and several runs can live in one process) and hands back
``{id, project, entity, mode, dir, group, name, url}`` for the run handle. A secondary joins with
what the handle says: online in W&B's shared mode (``x_primary=False``, ``x_label`` =
``<role>-r<rank>-p<pid>``, ``x_update_finish_state=False``); offline in its own run directory
under the same run id, named with its label (W&B names directories by the second, so two
processes starting together would otherwise share one), also with ``x_primary=False``: the run's
metadata (command line, git state, requirements) comes from the primary's directory. A
``WANDB_SERVICE`` token inherited from the parent process is dropped first: the parent's W&B
service already holds the run id and would refuse it. A role attached in a process that already
holds the run (the driver attaching as ``rollout``, say) writes through that process's run
object; the run then ends when its last user in the process closes, with the primary's status.
(A role that attaches after the primary closed opens its own connection under the same id.)

**Metrics** become history rows on named step axes (see :mod:`tracking_wandb.rows`); W&B's own
``_step`` is never set, so it stays monotonic however many roles write. The record's timestamp is
the row's ``_timestamp``.

**Config.** ``config.params`` (flat ``<role>/key`` keys) go to ``run.config.update(...,
allow_val_change=True)``: a changed value is recorded, never an error. The complete namespace
(values plus the pipeline's report, :func:`tracking_core.config.config_json`) is written as the
run file ``tracking-core/config/<namespace>.json`` and published with ``run.save(policy="now")``
from every writer, the secondaries included (W&B uploads run files from any process; only its
own ``config.yaml``, ``wandb-metadata.json`` and ``wandb-summary.json`` are primary-only). When
the primary closes, it folds every role section the job saved in its run directory
(``<tracking_dir>/runs/<run_id>/config/``) into its own config, so the run's config holds every
role's keys even where a secondary's config upload does not survive (see the README).

**Secrets.** Values arrive redacted. W&B also records the command line (``sys.argv[1:]``, read
when ``wandb.init`` sends its settings to the W&B service, and again if a job is built at
``finish``) in the run's environment record and ``wandb-metadata.json``; slime puts
``--wandb-key KEY`` there. ``sys.argv`` is therefore replaced by a redacted copy
(:func:`tracking_core.config.redact_argv`) for the duration of those two calls, under one lock;
other threads looking at ``sys.argv`` in that window see the redacted copy. An API key from
``--wandb-key`` is handed to ``wandb.Settings(api_key=...)`` (no ``wandb login``, so nothing is
written to ``~/.netrc``); ``WANDB_API_KEY`` is left for W&B to read. Console capture is off by
default (:mod:`tracking_wandb.options`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import wandb

from tracking_core.config import artifact_path, config_json, job_params, redact_argv
from tracking_core.files import replace_text
from tracking_core.options import tracking_option_dests
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
from tracking_core.rows import AxisDefinitions, RowRetry
from tracking_core.shared_run import SharedRun, SharedRuns, saved_role_sections

from . import media
from .config import wandb_config
from .options import WandbOptions, resolve, run_id_for, tags_for
from .options import target as run_target
from .rows import metric_rows

log = logging.getLogger("tracking_core.backends.wandb")

#: The run-file folder our files go to, beside W&B's own.
FILES_DIR = "tracking-core"
#: Exit codes W&B understands: 0 marks a run finished, anything else failed; 255 is what W&B's
#: own exit hook reports for an interrupted process (``wandb.sdk.lib.exit_hooks``).
EXIT_CODES = {RunStatus.FINISHED: 0, RunStatus.FAILED: 1, RunStatus.KILLED: 255}

_SERVICE_ENV = "WANDB_SERVICE"
_SERVICE_PID = re.compile(r"^\d+-(\d+)-")

#: The W&B runs open in this process (a run's status is its exit code); the table's lock
#: serialises wandb.init/finish (they read sys.argv, which is swapped meanwhile).
_runs = SharedRuns()
_lock = _runs.lock


@contextlib.contextmanager
def redacted_argv() -> Iterator[None]:
    """Show W&B a redacted ``sys.argv`` for the duration of the block (see the module doc)."""
    with _lock:
        saved = getattr(sys, "argv", None)
        sys.argv = redact_argv(saved or [])
        try:
            yield
        finally:
            if saved is None:
                del sys.argv
            else:
                sys.argv = saved


def drop_inherited_service() -> bool:
    """Forget a ``WANDB_SERVICE`` token this process inherited (one it did not start itself),
    so that ``wandb.init`` starts this process's own W&B service. True if one was dropped."""
    token = os.environ.get(_SERVICE_ENV)
    if not token:
        return False
    match = _SERVICE_PID.match(token)
    if match and int(match.group(1)) == os.getpid():
        return False
    os.environ.pop(_SERVICE_ENV, None)
    return True


def _auth_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, (wandb.errors.UsageError, wandb.errors.AuthenticationError)) and (
        "api key" in text or "api_key" in text or "login" in text or "credentials" in text
    )


class WandbBackend:
    """One process's view of the job's W&B run; called by one worker thread at a time."""

    def __init__(self, run: RunContext) -> None:
        self.context = run
        self.options: WandbOptions = resolve(run)
        self.shared: SharedRun | None = None
        self.mode = self.options.mode
        self._defined = AxisDefinitions()
        self._namespaces: set[str] = set()
        self._retry = RowRetry()

    # -- opening -------------------------------------------------------------------------------
    def _settings(self, run: RunContext, mode: str, primary: bool) -> Any:
        opts = self.options
        kwargs: dict[str, Any] = {"console": opts.console}
        if run.pid != os.getpid() and "x_stats_pid" in wandb.Settings.model_fields:
            # Delivering from a helper process: W&B's system metrics describe the training one.
            kwargs["x_stats_pid"] = run.pid
        if mode == "online":
            kwargs.update(mode="shared", x_primary=primary, x_label=run.label)
            if not primary:
                kwargs["x_update_finish_state"] = False
            if opts.host:
                kwargs["base_url"] = opts.host
            if opts.api_key:
                kwargs["api_key"] = opts.api_key
        elif mode == "offline":
            kwargs["mode"] = "offline"
            if not primary:
                # As online: the primary's directory carries the run's metadata (command line,
                # git state, requirements); a role's directory carries what the role wrote.
                kwargs.update(
                    x_primary=False,
                    x_label=run.label,
                    x_sync_dir_suffix=run.label,
                    x_update_finish_state=False,
                )
        else:
            kwargs["mode"] = "disabled"
        if not primary and "WANDB_SILENT" not in os.environ and "WANDB_QUIET" not in os.environ:
            kwargs["quiet"] = True
        return wandb.Settings(**kwargs)

    def _init(
        self,
        run: RunContext,
        entry: Mapping[str, Any],
        *,
        primary: bool,
        resume: bool,
    ) -> dict[str, Any]:
        mode = str(entry.get("mode") or self.options.mode)
        rid = str(entry["id"])
        with _lock:
            held = _runs.join(rid)
            if held is not None:
                self.shared = held
                self.mode = mode
                log.debug(
                    "W&B run %s is open in this process; %s writes through it", rid, run.label
                )
                return self._entry(held.run, mode, entry)
            if not primary:
                drop_inherited_service()
            root = Path(str(entry.get("dir") or self.options.root))
            root.mkdir(parents=True, exist_ok=True)
            kwargs: dict[str, Any] = {
                "id": rid,
                "project": entry.get("project") or None,
                "entity": entry.get("entity") or None,
                "group": entry.get("group") or None,
                "dir": str(root),
                "reinit": "create_new",
                "settings": self._settings(run, mode, primary),
            }
            if primary:
                kwargs["name"] = entry.get("name") or None
                tags, left_out = tags_for(run)
                if tags:
                    kwargs["tags"] = tags
                if left_out:
                    log.warning(
                        "W&B tags must be 1 to 64 characters; left out: %s", ", ".join(left_out)
                    )
                if resume:
                    kwargs["resume"] = "allow"
            with redacted_argv():
                wrun = wandb.init(**kwargs)
            self.shared = _runs.add(wrun, rid)
            self.mode = mode
        return self._entry(wrun, mode, {**entry, "dir": str(root)})

    @staticmethod
    def _entry(wrun: Any, mode: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        def attr(name: str) -> Any:
            try:
                return getattr(wrun, name)
            except Exception:  # noqa: BLE001 - a disabled run lacks some attributes
                return None

        out = {
            "id": attr("id") or entry.get("id"),
            "project": attr("project") or entry.get("project"),
            "entity": attr("entity") or entry.get("entity"),
            "mode": mode,
            "dir": entry.get("dir"),
            "group": attr("group") or entry.get("group"),
            "name": attr("name") or entry.get("name"),
        }
        url = attr("url") if mode == "online" else None
        if url:
            out["url"] = url
        return out

    @hookimpl
    def open_run(self, run: RunContext, target: Mapping[str, Any] | None) -> dict[str, Any]:
        """Open the job's run where ``target`` says (:func:`tracking_wandb.options.target`,
        computed when the run started: id, project, entity, group, name, mode, dir), whatever
        this process's environment says; slime's ``--wandb-run-id`` resumes that W&B run."""
        opts = self.options
        entry = dict(target) if target else run_target(run)
        try:
            out = self._init(run, entry, primary=True, resume=bool(opts.run_id))
        except Exception as exc:
            if entry.get("mode") != "online" or opts.mode_explicit or not _auth_error(exc):
                raise
            log.warning(
                "W&B could not log in (%s); writing the run offline under %s instead "
                "(upload it later with `wandb sync`; choose with --wandb-mode / $WANDB_MODE)",
                exc,
                entry.get("dir") or opts.root,
            )
            out = self._init(run, {**entry, "mode": "offline"}, primary=True, resume=False)
        log.info(
            "W&B run %s (%s) %s",
            out["id"],
            out["mode"],
            out.get("url") or f"in {out['dir']}",
        )
        return out

    @hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> dict[str, Any]:
        """Join the run named by the handle: a role's writer, or a primary resuming the job.

        ``attach`` may be only the target (the primary's open not reported yet): it already
        holds the pre-assigned run id, project, entity, mode and dir, which is all a writer
        needs to join the same run; nothing is looked up."""
        entry = dict(attach)
        if not entry.get("id"):
            entry["id"] = run_id_for(run, self.options)
        entry.setdefault("mode", self.options.mode)
        entry.setdefault("dir", str(self.options.root))
        return self._init(run, entry, primary=run.primary, resume=run.primary)

    def _require(self) -> SharedRun:
        if self.shared is None:
            raise RuntimeError("the W&B run is not open in this process (open or attach failed)")
        return self.shared

    # -- config --------------------------------------------------------------------------------
    @hookimpl
    def log_config(self, config: ConfigSection, role: str | None) -> None:
        shared = self._require()
        with shared.lock:
            params = wandb_config(config)
            if params:
                shared.run.config.update(params, allow_val_change=True)
            self._namespaces.add(config.namespace)
            self._write_file(shared, artifact_path(config), config_json(config))

    def _write_file(self, shared: SharedRun, name: str, text: str) -> None:
        """Write ``tracking-core/<name>`` into the run's files and publish it now."""
        if self.mode == "disabled":
            return
        files = Path(shared.run.dir)
        path = files / FILES_DIR / name
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, text)
        shared.run.save(str(path), base_path=str(files), policy="now", glob=False)

    def _fold_role_configs(self, shared: SharedRun) -> None:
        """Merge the role sections this job saved in its run directory into the run's config
        (primary only, at close): one node's or a shared file system's roles, whatever became
        of their own uploads; each as its params hold it (no tracking option, no null value:
        :func:`tracking_core.config.job_params`)."""
        merged: dict[str, Any] = {}
        tracking = tracking_option_dests()
        for section in saved_role_sections(self.context, self._namespaces, "W&B"):
            merged.update(job_params(section, tracking).params)  # what the role's params hold
        if merged:
            shared.run.config.update(merged, allow_val_change=True)

    # -- metrics -------------------------------------------------------------------------------
    def define_axes(self, run: Any, rows: Sequence[Any]) -> None:
        """Define the step axes and metric -> axis pairs that ``rows`` use for the first time
        (call it under the shared lock); a definition that fails is forgotten, so that the
        retry of the same records defines it again."""
        self._defined.define(
            rows, lambda name, axis: run.define_metric(name, step_metric=axis), run.define_metric
        )

    @hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        shared = self._require()
        rows = metric_rows(records)
        with shared.lock:
            self.define_axes(shared.run, rows)
            # W&B cannot log a batch atomically: a failing batch's retry (the same records)
            # starts where it stopped.
            for row in self._retry.pending(records, rows):
                shared.run.log(row.data())

    # -- tables, histograms, texts, artifacts (see tracking_wandb.media) ------------------------
    @hookimpl
    def log_table(self, table: TableRecord) -> None:
        if self.mode != "disabled":
            media.log_table(self, self._require(), table)

    @hookimpl
    def log_histogram(self, histogram: HistogramRecord) -> None:
        if self.mode != "disabled":
            media.log_histogram(self, self._require(), histogram)

    @hookimpl
    def log_text(self, text: TextRecord) -> None:
        if self.mode != "disabled":
            media.log_text(self, self._require(), text)

    @hookimpl
    def log_artifact(self, artifact: ArtifactRecord) -> None:
        if self.mode != "disabled":
            media.log_artifact(self._require(), artifact)

    # -- closing -------------------------------------------------------------------------------
    @hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        """The primary ends the run with ``status`` (0 finished, 1 failed, 255 killed); a
        secondary finishes only its own connection (``x_update_finish_state=False`` keeps the
        run's state the primary's)."""
        shared = self.shared
        if shared is None:
            return
        code = EXIT_CODES[RunStatus(status)]
        with _lock:
            if run.primary:
                with shared.lock:
                    try:
                        self._fold_role_configs(shared)
                    except Exception as exc:  # noqa: BLE001 - the run must still end
                        log.warning("could not fold role configs into the W&B run: %s", exc)
            self.shared = None
            if not _runs.leave(shared, code, primary=run.primary):
                log.debug("W&B run %s stays open for %d other user(s)", shared.key, shared.users)
                return
            with shared.lock, redacted_argv():
                shared.run.finish(exit_code=shared.status)
