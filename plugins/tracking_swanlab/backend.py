"""The ``swanlab`` backend instance: the only module of this plugin that imports ``swanlab``.

**One experiment per job, one run directory per writer.** SwanLab keeps one run per process
(``swanlab.init`` refuses a second) and each run writes its own directory (its ``.swanlab``
record file is opened exclusively), so several processes never share a directory. What SwanLab
does allow is several runs under one run id: ``swanlab.init(id=..., parallel="shared")`` (which
forces ``resume="allow"``). So every writer opens its own SwanLab run with the job's id:

* **cloud**: all writers resume the one experiment of that id on the server;
* **offline / local**: each writer has its own run directory under the log dir,
  ``run-<time>-<id>-<label>`` (``...-primary-p<pid>`` for the driver, ``...-actor-r0-p<pid>``
  for a role), merged into one experiment by ``swanlab sync --id <id> DIR`` for each directory
  (:func:`tracking_swanlab.options.sync_commands`, the primary's last).

Roles attached in the process that holds the run (delivery on the driver's threads) write through
that process's run; it ends when its last user closes, with the primary's status.

**Config.** ``config.params`` (flat ``<role>/key`` keys) go to ``run.config`` (SwanLab's
``files/config.yaml``); a changed value replaces the old one. SwanLab turns a top-level ``None``
into ``{}``, so ``None`` is stored as the text ``null`` (MLflow's spelling). The complete
namespace (values and the pipeline's report) is written as the run file
``files/tracking-core/config/<namespace>.json`` and saved with ``run.save(policy="now")``. SwanLab
uploads a directory's whole ``config.yaml`` in one piece, so the primary folds every role's keys
found in the job's run directory into its own config when it closes: its config is the complete
one, which is why its directory is synced last.

**Metrics** are logged row by row with ``step=`` the record's step: SwanLab keeps a step series per
key, so every role's axis is its own; the axis itself is logged as a metric too
(``actor/train/step``) and made the x-axis of the role's metrics (``define_metric``). SwanLab drops
a value whose key already has that step, which makes a retried batch harmless.

**Rich kinds**, each SwanLab's own: a text is a ``swanlab.Text`` (``media/text/``); a table a
``swanlab.echarts.Table`` (headers and rows, ``media/echarts/``); a histogram a
``swanlab.echarts.Bar`` of its bins (one bar per bin, labelled by its range), with its summary
(``count``, ``mean``, ``min``, ``max``, percentiles) as scalars ``<key>/<stat>`` on the same step;
an artifact is copied (hard-linked where possible) into ``files/tracking-core/artifacts/<name>``
and saved with the run (``run.save``). All at the record's step.

**Status**: FINISHED -> ``success``, FAILED -> ``crashed``, KILLED -> ``aborted`` (SwanLab's
finish states). A role's writer finishes only its own run.

**Secrets.** The API key (``--swanlab-api-key`` or ``$SWANLAB_API_KEY``) is handed to SwanLab to log
in and never written anywhere by this backend. SwanLab records the command line in
``swanlab-metadata.json`` (read from ``/proc/self/cmdline``): it is shown a redacted one. Terminal
capture is off (``terminal.proxy_type="none"``) unless ``$SWANLAB_TERMINAL_PROXY_TYPE`` asks for it:
what a host prints (an argument dump) can carry secrets no redaction sees. The role writers do not
repeat the primary's hardware, requirements and git probes, nor its system monitor.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import swanlab

from tracking_core.config import artifact_path, config_json, redact_argv
from tracking_core.files import replace_text
from tracking_core.names import path_under
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
from tracking_core.rows import AxisDefinitions, RowRetry, StepRow, metric_rows
from tracking_core.shared_run import SharedRun, SharedRuns, saved_role_sections

from .options import SwanlabOptions, resolve, run_dir_name, run_id_for, sync_commands
from .options import target as run_target

log = logging.getLogger("tracking_core.backends.swanlab")

#: The run-file folder our files go to, beside SwanLab's own.
FILES_DIR = "tracking-core"
#: SwanLab's finish states for ours.
STATES = {RunStatus.FINISHED: "success", RunStatus.FAILED: "crashed", RunStatus.KILLED: "aborted"}

#: The SwanLab runs open in this process (a run's status is its finish state); the table's lock
#: serialises swanlab.init/finish (they swap process-wide hooks).
_runs = SharedRuns()
_lock = _runs.lock


@contextlib.contextmanager
def redacted_command() -> Iterator[None]:
    """Show SwanLab's runtime probe a redacted command line while ``swanlab.init`` runs.

    SwanLab reads the command from ``/proc/self/cmdline`` on Linux (where slime puts
    ``--wandb-key``): its probe's ``get_command`` is pointed at the redacted ``sys.argv`` meanwhile.
    """
    saved_argv = getattr(sys, "argv", None)
    sys.argv = redact_argv(saved_argv or [])
    try:
        from swanlab.sdk.internal.probe_python.environment import runtime
    except ImportError:  # another SwanLab layout: the probe is switched off instead (_settings)
        runtime = None
    saved_get = getattr(runtime, "get_command", None)
    if runtime is not None and saved_get is not None:
        runtime.get_command = lambda: " ".join(sys.argv)
    try:
        yield
    finally:
        if runtime is not None and saved_get is not None:
            runtime.get_command = saved_get
        if saved_argv is None:
            del sys.argv
        else:
            sys.argv = saved_argv


def _probe_patchable() -> bool:
    try:
        from swanlab.sdk.internal.probe_python.environment import runtime
    except ImportError:
        return False
    return callable(getattr(runtime, "get_command", None))


def config_values(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as SwanLab's config keeps them: a top-level ``None`` (which SwanLab would turn
    into ``{}``) as the text ``null``."""
    return {key: ("null" if value is None else value) for key, value in params.items()}


class SwanlabRow(StepRow):
    """A ``run.log`` call: the axis's step logged as a float metric, no timestamp key."""

    step_type: ClassVar[type] = float


class SwanlabBackend:
    """One process's view of the job's SwanLab experiment; called by one worker thread."""

    def __init__(self, run: RunContext) -> None:
        self.context = run
        self.options: SwanlabOptions = resolve(run)
        self.shared: SharedRun | None = None
        self.mode = self.options.mode
        self._defined = AxisDefinitions()
        self._namespaces: set[str] = set()
        self._retry = RowRetry()
        #: A role's attach entry, until its SwanLab run is opened (see :meth:`attach_run`).
        self._pending: dict[str, Any] | None = None

    # -- opening -------------------------------------------------------------------------------
    def _settings(self, run: RunContext, entry: Mapping[str, Any], primary: bool) -> Any:
        opts = self.options
        kwargs: dict[str, Any] = {"interactive": False}
        if "SWANLAB_TERMINAL_PROXY_TYPE" not in os.environ:
            kwargs["terminal"] = swanlab.Settings.Terminal(proxy_type="none")
        probe: dict[str, Any] = {}
        if not _probe_patchable():
            probe["runtime"] = False  # its command line could not be redacted
        if not primary:
            probe.update(hardware=False, requirements=False, git=False, monitor=False)
        if probe:
            kwargs["probe"] = swanlab.Settings.Probe(**probe)
        kwargs["run"] = swanlab.Settings.Run(
            parallel="shared", dir=run_dir_name(str(entry["id"]), run.label)
        )
        if opts.api_key:
            kwargs["api_key"] = opts.api_key
        if opts.host:
            kwargs["api_host"] = opts.host
        return swanlab.Settings(**kwargs)

    def _init(self, run: RunContext, entry: Mapping[str, Any], *, primary: bool) -> dict[str, Any]:
        mode = str(entry.get("mode") or self.options.mode)
        rid = str(entry["id"])
        log_dir = Path(str(entry.get("log_dir") or self.options.log_dir))
        with _lock:
            held = _runs.join(rid)
            if held is not None:
                self.shared, self.mode = held, mode
                log.debug("SwanLab run %s is open in this process; %s writes through it", rid, run.label)
                return self._entry(held.run, mode, entry, log_dir)
            if swanlab.has_run():
                raise RuntimeError(
                    "SwanLab keeps one run per process and this process already has one (the "
                    "host's own swanlab.init?): deliver from a helper process "
                    "(--tracking-delivery process, the default) or finish that run first"
                )
            log_dir.mkdir(parents=True, exist_ok=True)
            excepthook = sys.excepthook
            try:
                with redacted_command():
                    srun = swanlab.init(
                        project=entry.get("project") or None,
                        workspace=entry.get("workspace") or None,
                        name=entry.get("name") or run.name,
                        id=rid,
                        mode=mode,
                        log_dir=str(log_dir),
                        settings=self._settings(run, entry, primary),
                    )
            finally:
                # SwanLab would end the run itself at exit or on an uncaught exception, before
                # tracking-core delivered what is left: the run's end is ours to decide.
                sys.excepthook = excepthook
            handler = getattr(srun, "_handle_atexit", None)
            if handler is not None:
                atexit.unregister(handler)
            self.shared = _runs.add(srun, rid)
            self.mode = mode
        return self._entry(srun, mode, entry, log_dir)

    @staticmethod
    def _entry(srun: Any, mode: str, entry: Mapping[str, Any], log_dir: Path) -> dict[str, Any]:
        out = {
            "id": entry.get("id"),
            "project": entry.get("project"),
            "workspace": entry.get("workspace"),
            "name": entry.get("name"),
            "mode": mode,
            "log_dir": str(log_dir),
        }
        if mode == "online":
            with contextlib.suppress(Exception):
                out["url"] = srun.url
        return out

    @hookimpl
    def open_run(self, run: RunContext, target: Mapping[str, Any] | None) -> dict[str, Any]:
        """Open the job's experiment where ``target`` says (:func:`tracking_swanlab.options.target`:
        id, project, workspace, name, mode, log dir), whatever this process's environment says.
        A cloud login that fails when cloud was only the default writes offline instead."""
        entry = dict(target) if target else run_target(run)
        try:
            out = self._init(run, entry, primary=True)
        except Exception as exc:
            if entry.get("mode") != "online" or self.options.mode_explicit:
                raise
            log.warning(
                "SwanLab could not start in cloud mode (%s: %s); writing offline under %s instead "
                "(upload it later with `swanlab sync`; choose with --swanlab-mode / $SWANLAB_MODE)",
                type(exc).__name__,
                exc,
                entry.get("log_dir"),
            )
            out = self._init(run, {**entry, "mode": "offline"}, primary=True)
        if out["mode"] == "online":
            log.info("SwanLab experiment %s: %s", out["id"], out.get("url") or out["project"])
        elif out["mode"] != "disabled":
            log.info(
                "SwanLab experiment %s (%s) in %s; upload with `swanlab sync --id %s DIR` for each "
                "of its run directories there",
                out["id"],
                out["mode"],
                out["log_dir"],
                out["id"],
            )
        return out

    @hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> dict[str, Any]:
        """Join the job's experiment named by the handle: a role's writer opens its own SwanLab run
        under the job's id (cloud: the same experiment; offline: its own directory), a resuming
        primary a new directory under the same id. ``attach`` may be only the target: it holds
        everything a writer needs, nothing is looked up. A role's run is opened with its first
        config, metrics or close, so a writer with nothing to say (a replay that only another
        tracker needed) leaves no empty directory."""
        entry = dict(attach)
        entry.setdefault("id", run_id_for(run))
        entry.setdefault("mode", self.options.mode)
        entry.setdefault("log_dir", str(self.options.log_dir))
        entry.setdefault("project", self.options.project)
        if run.primary:
            return self._init(run, entry, primary=True)
        self._pending = entry
        return self._entry(None, str(entry["mode"]), entry, Path(str(entry["log_dir"])))

    def _require(self) -> SharedRun:
        if self.shared is None and self._pending is not None:
            self._init(self.context, self._pending, primary=False)
            self._pending = None
        if self.shared is None:
            raise RuntimeError("the SwanLab run is not open in this process (open or attach failed)")
        return self.shared

    # -- config --------------------------------------------------------------------------------
    @hookimpl
    def log_config(self, config: ConfigSection, role: str | None) -> None:
        shared = self._require()
        with shared.lock:
            if config.params:
                shared.run.config.update(config_values(config.params))
            self._namespaces.add(config.namespace)
            self._write_file(shared, artifact_path(config), config_json(config))

    def _write_file(self, shared: SharedRun, name: str, text: str) -> None:
        """Write ``files/tracking-core/<name>`` into the run directory and save it now."""
        if self.mode == "disabled":
            return
        files = Path(shared.run.dir) / "files"
        path = files / FILES_DIR / name
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, text)
        shared.run.save(str(path), base_path=str(files), policy="now")

    def _fold_role_configs(self, shared: SharedRun) -> None:
        """Merge the role sections this job saved in its run directory into the primary's config
        (at close): one node's or a shared file system's roles."""
        merged: dict[str, Any] = {}
        for section in saved_role_sections(self.context, self._namespaces, "SwanLab"):
            merged.update(section.params)
        if merged:
            shared.run.config.update(config_values(merged))

    # -- metrics -------------------------------------------------------------------------------
    @hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        shared = self._require()
        rows = metric_rows(records, SwanlabRow)
        with shared.lock:
            self._defined.define(rows, lambda name, axis: shared.run.define_metric(name, x_axis=axis))
            # A failing batch's retry (the same records) starts where it stopped.
            for row in self._retry.pending(records, rows):
                shared.run.log(row.data(), step=row.step)

    # -- rich kinds ----------------------------------------------------------------------------
    def _log_media(self, name: str, value: Any, step: int | None, extra: Mapping[str, float] | None = None) -> None:
        shared = self._require()
        with shared.lock:
            data: dict[str, Any] = {name: value, **(extra or {})}
            shared.run.log(data, step=step)

    @hookimpl
    def log_text(self, text: TextRecord) -> None:
        self._log_media(text.name, swanlab.Text(text.text), text.step)

    @hookimpl
    def log_table(self, table: TableRecord) -> None:
        chart = swanlab.echarts.Table().add(list(table.columns), [list(row) for row in table.rows])
        self._log_media(table.name, swanlab.ECharts(chart), table.step)

    @hookimpl
    def log_histogram(self, histogram: HistogramRecord) -> None:
        edges = histogram.edges
        labels = [f"[{edges[i]:.4g}, {edges[i + 1]:.4g})" for i in range(len(histogram.counts))]
        bar = swanlab.echarts.Bar().add_xaxis(labels).add_yaxis(histogram.key, list(histogram.counts))
        summary = {f"{histogram.name}/{k}": float(v) for k, v in histogram.summary().items()}
        self._log_media(histogram.name, swanlab.ECharts(bar), histogram.step, summary)

    @hookimpl
    def log_artifact(self, artifact: ArtifactRecord) -> None:
        """Copy the snapshot into the run's files (it is removed once every tracker has it) and
        save it with the run."""
        shared = self._require()
        if self.mode == "disabled":
            return
        files = Path(shared.run.dir) / "files"
        dest = files / FILES_DIR / "artifacts" / path_under(artifact.name, "artifact name")
        source = Path(artifact.path)
        pairs = (
            [(source / rel, dest / rel) for rel, _ in artifact.files]
            if artifact.is_dir
            else [(source, dest / (artifact.files[0][0] if artifact.files else source.name))]
        )
        for src, dst in pairs:
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.exists():
                dst.unlink()
            try:
                os.link(src, dst)
            except OSError:
                shutil.copyfile(src, dst)
        with shared.lock:
            shared.run.save(str(dest / "**" / "*"), base_path=str(files), policy="now")

    # -- closing -------------------------------------------------------------------------------
    @hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        """The primary ends its run with ``status`` (after folding the roles' configs in); a
        secondary finishes its own run (its directory's finish record says ``success``)."""
        self._pending = None  # a role that never wrote anything opens no run to close it
        shared = self.shared
        if shared is None:
            return
        state = STATES[RunStatus(status)]
        with _lock:
            if run.primary:
                with shared.lock:
                    try:
                        self._fold_role_configs(shared)
                    except Exception as exc:  # noqa: BLE001 - the run must still end
                        log.warning("could not fold role configs into the SwanLab run: %s", exc)
            self.shared = None
            if not _runs.leave(shared, state, primary=run.primary):
                return
            final = shared.status
            directory = str(shared.run.dir) if self.mode != "disabled" else None
            with shared.lock:
                error = None if final == "success" else f"tracking-core: the run ended {final}"
                shared.run.finish(state=final, error=error)
        if run.primary and directory and self.mode in ("offline", "local"):
            commands = sync_commands(Path(directory).parent, shared.key)
            log.info("SwanLab: upload the job's experiment with: %s", " && ".join(commands))
