"""The hook contract of tracking-core.

Two kinds of plugins implement it:

* **collectors** answer :func:`collect_config` with their part of a role's config;
* **backends** are offered by name through :func:`register_backends`; when a run selects one, its
  factory builds an instance that is registered as a plugin for the life of the run and receives
  :func:`open_run` or :func:`attach_run`, then :func:`log_config`, :func:`log_metrics` (and the
  rich kinds :func:`log_table`, :func:`log_histogram`, :func:`log_text`, :func:`log_artifact`)
  and finally :func:`close_run`; a backend that every node of the job reaches (a tracking server)
  may also keep the job's **writer registry**, :func:`publish_writer` and :func:`read_writers`,
  through which a finishing primary learns what the writers on other nodes still owe. Each
  backend instance is called through pluggy, alone, from its own worker
  thread, one call at a time: a backend never needs locks of its own and never sees another
  backend's calls.

Plugins mark their implementations with ``@tracking_core.hookimpl``; an implementation may accept
any subset of a hook's arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .commands import CommandRegistrar
    from .context import RunContext
    from .handle import RunHandle
    from .options import HostParser
    from .readback import TrackerReport
    from .records import (
        ArtifactRecord,
        ConfigSection,
        HistogramRecord,
        MetricRecord,
        RunStatus,
        TableRecord,
        TextRecord,
    )
    from .registry import BackendRegistrar
    from .viewers import Viewer

PROJECT = "tracking_core"

hookspec = pluggy.HookspecMarker(PROJECT)

#: The names of every hook of the contract, in the order the README documents them.
HOOK_NAMES = (
    "register_backends",
    "add_options",
    "host_backends",
    "collect_config",
    "open_run",
    "attach_run",
    "log_config",
    "log_metrics",
    "log_table",
    "log_histogram",
    "log_text",
    "log_artifact",
    "close_run",
    "publish_writer",
    "read_writers",
    "tracker_location",
    "tracker_sync",
    "tracker_viewer",
    "read_tracker",
    "show_run_files",
    "project_options",
    "register_commands",
)


@hookspec
def register_backends(register: BackendRegistrar) -> None:
    """Offer named backends by calling ``register(Backend(name, factory, requires=..., extra=...))``.

    A :class:`~tracking_core.plugin_api.Backend` describes one backend as data. ``factory`` is a
    callable, or a ``"module:attribute"`` string imported only when the backend is selected, that
    takes a :class:`RunContext` and returns the backend instance (an object with hook
    implementations). ``requires`` lists the import names the backend needs and ``extra`` the
    distribution extra that installs them, so selecting a backend whose library is missing says
    what to install. ``delivery=Delivery(max_batch=..., batch_interval=...)``: ``max_batch`` caps
    the records per :func:`log_metrics` call (default 1000); ``batch_interval`` makes the worker
    deliver at most that often (seconds) unless a full batch is waiting or the run flushes, for
    trackers whose every call has a large fixed cost. ``target`` (a callable or
    ``"module:attribute"``) takes a :class:`RunContext` and says where the backend's run goes
    (JSON, never a credential), without connecting or importing the tracker: it is computed in
    the training process at start, kept in the run handle, and handed to :func:`open_run`.
    ``terminal=True`` says the backend writes to the training process's terminal (its stderr): a
    delivery process running it keeps that stderr open, where otherwise its output goes to a log
    file of its own. Nothing here may import a tracker library: listing plugins must stay cheap.
    """


@hookspec
def add_options(parser: HostParser) -> None:
    """Add command-line options to the host's parser with ``parser.add_argument(...)``.

    The parser skips any option string the host already defines (slime and Megatron already have
    ``--wandb-project``, ``--tensorboard-dir``, ...), so a plugin declares what it needs and reuses
    what exists; ``parser.has_option("--wandb-project")`` tells which is the case.
    """


@hookspec
def host_backends(args: Any) -> Sequence[str] | None:
    """Name the backends the host's own switches select (slime's ``--use-wandb``), or None.

    Consulted only when neither ``--tracking-backends`` nor ``TRACKING_CORE_BACKENDS`` is set.
    ``args`` is the host's parsed arguments (any object with attributes), possibly None.
    """


@hookspec
def collect_config(role: str, args: Any) -> Mapping[str, Any] | None:
    """Return this plugin's part of ``role``'s config (or None to add nothing).

    Called in the role's writer process when it attaches, for every collector; the mappings
    merge in plugin load order (built-in plugins first), and a key two collectors disagree on is
    reported with both plugin names. ``args`` is the host's arguments object passed to
    ``attach``, if any. Values may be of any type: the config pipeline converts and redacts them.
    """


@hookspec(firstresult=True)
def open_run(run: RunContext, target: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Open this backend's run for a new job (called in the primary's delivery).

    ``target`` is where the run goes, as the backend's ``target`` function (see
    :func:`register_backends`) said at start; open it there, not wherever the current
    environment points (``tracking-core sync`` may run in another shell). Must be safe to call
    again after a failure. Return what another process needs to attach (JSON-serialisable: a
    tracking URI and run id, a log directory, ...): it replaces the target in the run handle.
    """


@hookspec(firstresult=True)
def attach_run(run: RunContext, attach: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Attach to an existing run from ``attach``, this backend's entry in the run handle.

    Called in a secondary (``run.role`` names its role) and in a primary resuming a run
    (``run.primary`` is True). ``attach`` may be only the target, when the primary's open is
    not known yet: find the job's run by ``run.run_id`` then, and raise while it does not exist
    (the call is retried; records wait in the journal). Never creates a run in a secondary;
    never a collective call. May return an updated entry.
    """


@hookspec
def log_config(config: ConfigSection, role: str | None, run: RunContext) -> None:
    """Log one namespace of config: the launch config (``role`` None) or ``role``'s config.

    ``config.params`` holds the flat prefixed keys to show as parameters and ``config.values``
    the complete namespace to keep losslessly (as an artifact or text). Values are already
    converted to plain data and redacted. The same section may arrive again (a resumed run):
    re-logging an unchanged value must not fail, and a changed value must be recorded, not raise.
    """


@hookspec
def log_metrics(records: Sequence[MetricRecord], run: RunContext) -> None:
    """Write a batch of metric records, in order.

    Returning acknowledges every record of the batch; raising means none of it is acknowledged
    and the whole batch will be offered again (same records, same timestamps). A backend should
    therefore write a batch atomically where its tracker allows it.
    """


@hookspec
def log_table(table: TableRecord, run: RunContext) -> None:
    """Write one table (rows of str/number/bool/None cells under ``table.columns``) at its step.

    Like every record: returning acknowledges it, raising has it offered again (the same
    record), and one the backend keeps refusing while it takes others is skipped for this
    backend only and counted. A backend without this hook gets the table as a markdown
    :func:`log_text` (``<key>`` on the same step), or, without that either, is told once that
    its tables are skipped.
    """


@hookspec
def log_histogram(histogram: HistogramRecord, run: RunContext) -> None:
    """Write one distribution, as bins plus its exact summary (see :class:`HistogramRecord`).

    A backend without this hook gets the summary as metric series on the same step
    (``<key>/count``, ``/mean``, ``/min``, ``/max``, ``/p5`` ... ``/p95``) through
    :func:`log_metrics`.
    """


@hookspec
def log_text(text: TextRecord, run: RunContext) -> None:
    """Write one text (already redacted) at its step. Without this hook, texts are skipped for
    the backend, with one warning, and counted."""


@hookspec
def log_artifact(artifact: ArtifactRecord, run: RunContext) -> None:
    """Store a file or a directory: read it from ``artifact.path`` (a snapshot taken when it
    was logged; it stays until every backend has it). Store it under ``artifact.name`` where
    the tracker has artifact paths. Without this hook the backend gets a :func:`log_text` note
    (name, kind, size, SHA-256, where the file was) instead."""


@hookspec
def close_run(status: RunStatus, run: RunContext) -> None:
    """Flush and close. A primary ends the run with ``status``; a secondary only flushes
    and detaches, leaving the run open for the others."""



@hookspec
def publish_writer(state: Mapping[str, Any], run: RunContext) -> None:
    """Record one writer's state where every node of the job can read it (optional).

    ``state`` is plain JSON: ``label`` (the writer's key in the registry, unique per writing
    process), ``role``, ``rank``, ``host``, ``pid``, ``state`` (``writing``, ``complete`` or
    ``incomplete``), ``journaled`` and ``delivered`` (values this backend was given / took from
    that writer so far; ``rejected`` the ones it refused), ``through`` (epoch seconds: what it
    logged before then is delivered), ``at`` (epoch seconds of the publication), ``beat`` (seconds between its publications while it writes; 0: none),
    ``tracking_dir`` (the writer's own, on its host) and ``sync`` (the command that delivers its
    leftovers there). A writer publishes ``writing`` when it has opened or attached the run, then
    as a heartbeat and when it has caught up, and ``complete`` or ``incomplete`` when it closes;
    ``tracking-core sync`` publishes ``complete`` for the writer of a journal it completes.
    Replace the writer's previous state. A primary's closing state may also hold ``incomplete``
    (label -> what that writer owes and the command that delivers it) and ``intended_status``:
    the primary closed the run FAILED instead of ``intended_status`` because those writers owe
    data; record that on the run, and once every writer named there is ``complete``, set the run
    to ``intended_status`` and remove the record. Raising only costs this publication.
    """


@hookspec(firstresult=True)
def read_writers(run: RunContext) -> Mapping[str, Mapping[str, Any]] | None:
    """Every writer state the job's run holds, label -> state as :func:`publish_writer` got it
    (optional; None: this backend keeps no registry). A finishing primary asks it to wait for
    the writers on other nodes and to name, in its summary and on the run, each that still owes
    data."""


# -- what a tracker says about a run it holds (``tracking-core show`` / ``ui``, start and end) --
# Plugin-module hooks, asked per backend of a run with its entry of the run handle: the plugin
# that offers the backend answers, every other plugin returns None.


@hookspec(firstresult=True)
def tracker_location(backend: str, entry: Mapping[str, Any], handle: RunHandle) -> Sequence[str] | None:
    """Say where ``backend``'s data of the run is and the command that shows it, one line each.

    ``entry`` is the backend's entry of the run handle (its target, or what ``open_run``
    returned); ``handle`` the whole handle. The lines go under the run's start line and after
    the demo's run. Return None for a backend that is not this plugin's, ``[]`` to say nothing
    (a backend whose output was on the terminal). Without an answer, the entry itself is shown.
    """


@hookspec(firstresult=True)
def tracker_sync(backend: str, entry: Mapping[str, Any], handle: RunHandle) -> Sequence[str] | None:
    """Say how to upload ``backend``'s data of the run that is kept only on this machine (an
    offline run), one line each: said under the summary at the end of the run.

    Return None where nothing waits to be uploaded, or for a backend that is not this plugin's.
    """


@hookspec(firstresult=True)
def tracker_viewer(
    backend: str, entry: Mapping[str, Any], handle: RunHandle, host: str, port: int | None, dry_run: bool
) -> Viewer | None:
    """Say what ``tracking-core ui`` starts to look at ``backend``'s data of the run: a
    :class:`~tracking_core.viewers.Viewer` with the command, the URL to open and the URL that
    answers once it is up; or one without a command whose ``url`` or ``note`` says where to
    look (a tracking server's own UI, an offline run to upload first).

    ``port`` is a free port on ``host`` for a backend that declares ``viewer_port`` in its
    registration (``--<backend>-port`` picks another), else None. ``dry_run``: the command is
    only printed, so find nothing that needs the tracker's library or server. Return None for a
    backend that is not this plugin's.
    """


@hookspec(firstresult=True)
def read_tracker(backend: str, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport | None:
    """Read ``backend``'s data of the run back with the tracker's own reader, for
    ``tracking-core show``: a :class:`~tracking_core.readback.TrackerReport` with where it is,
    the run's status and the last value of each series.

    Raise when it cannot be read: the error is said on the backend's line (an ImportError with
    the command that installs the backend's extra) and the other backends are still read. Called
    in a thread of its own, beside the other backends' readers. Return None for a backend that is
    not this plugin's.
    """


@hookspec(firstresult=True)
def show_run_files(run: str, tracking_dir: str, limit: int) -> Sequence[str] | None:
    """Show a run that has no saved handle from this plugin's own files: the lines
    ``tracking-core show RUN`` prints, when ``run`` (a directory, or a run id under
    ``tracking_dir``) names such a run; else None. ``limit``: the most keys or series shown of
    each section (``--limit``)."""


@hookspec
def project_options(project: str) -> Mapping[str, Any] | None:
    """Return the backend options that put a host's runs in its project ``project`` (Accelerate's
    ``init_trackers(project_name)``, verl's ``project_name``): ``{"mlflow_experiment": project}``.

    Leave out an option the tracker's own environment variable already sets (``WANDB_PROJECT``):
    that variable wins, as it would with the host's own tracker integration. Options the host
    passes itself win over these; return None to add nothing.
    """


@hookspec
def register_commands(register: CommandRegistrar) -> None:
    """Add subcommands to ``tracking-core`` by calling ``register(name, run, help=..., parser=...)``.

    ``help`` is the command's line in ``tracking-core --help``. ``parser`` (optional) builds the
    command's own :class:`argparse.ArgumentParser`, its options, description and ``--help``:
    it is called only when the command runs, so listing commands never imports what a command
    needs. ``run`` gets the namespace that parser made of the arguments after the command's
    name and returns the exit status (None: 0); an option of that parser also given before the
    command (``tracking-core --tracking-dir DIR NAME``) fills it when not given after. A name
    that is taken (a built-in command, or another plugin's) is refused; a plugin whose hook
    raises is reported by name and none of its commands is added.
    """
