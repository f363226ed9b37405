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
    from .host_parser import HostParser
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

PROJECT = "tracking_core"

hookspec = pluggy.HookspecMarker(PROJECT)

@hookspec
def register_backends(register: BackendRegistrar) -> None:
    """Offer named backends by calling ``register(Backend(name, factory, ...))``.

    A :class:`~tracking_core.plugin_api.Backend` describes one backend as data: the factory that
    builds its instance (a callable, or a ``"module:attribute"`` string imported only when the
    backend is selected), what it ``requires`` and the ``extra`` that installs it, how its metrics
    are batched, its ``target`` (where its run goes, computed at start without the tracker), and
    its ``views`` (what the core says about its runs: where they are, how to upload them, their
    viewer and read-back, the options a host's project sets). Nothing here may import a tracker
    library: listing plugins must stay cheap.
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
    and detaches, leaving the run open for the others. ``run.ended_at`` is when the job ended
    it (epoch seconds, from its journal; ``run.started_at`` when it started, where sync opens
    the run): a tracker that records these times takes them, also where ``tracking-core sync``
    closes the run long after."""



@hookspec
def publish_writer(state: Mapping[str, Any], run: RunContext) -> None:
    """Record one writer's state where every node of the job can read it (optional).

    ``state`` is plain JSON: ``label`` (the writer's key in the registry, unique per writing
    process), ``role``, ``rank``, ``host``, ``pid``, ``state`` (``writing``, ``complete`` or
    ``incomplete``), ``journaled`` and ``delivered`` (values this backend was given / took from
    that writer so far; ``rejected`` the ones it refused), ``seq`` (its publications, counted),
    ``behind`` (seconds, on its own clock, between the publication and the time before which
    everything it logged was delivered), ``at`` (epoch seconds of the publication on its host's
    clock: shown, never compared with another host's), ``beat`` (seconds between its
    publications while it writes; 0: none), ``tracking_dir`` (the writer's own, on its host) and
    ``sync`` (the command that delivers its leftovers there); every string already redacted.
    Keep every value whole: what does not fit where the tracker stores it goes elsewhere (MLflow
    gives each string of a state a share of one tag, and each writer a primary names a tag of
    its own), and a value the tracker may have cut is never read back as a verdict. A writer publishes ``writing`` when it has opened or attached the run, then
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
