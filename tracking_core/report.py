"""What a run says to the person running it: where it goes when it starts, what arrived when it
ends, and the command that delivers the rest.

Training scripts seldom configure logging, and a run's start and end are what their user wants
to see: so these lines go to ``tracking_core.report``, a logger that shows them by default. Its
own handler writes them to stderr while nothing else would (no handler on the root logger or on
``tracking_core``); once the application configures logging, they reach its handlers instead,
in its format. The start line and the summary of a complete run are INFO records of that logger
(visible although the root logger's level is WARNING: the logger's own level is INFO); an
incomplete delivery is one WARNING block. Only the job's primary says them (once per run, not
once per rank). ``--tracking-quiet`` / ``$TRACKING_CORE_QUIET`` silence the start line and a
complete run's summary; an incomplete delivery is still said.

Every command printed here runs as printed from any shell: :func:`tracking_core.views.command` names
``tracking-core`` by its full path when ``PATH`` does not find the one beside this Python (the
virtual environment not activated), and as ``<python> -m tracking_core`` where there is no
console script at all (a source checkout on ``PYTHONPATH``).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import settings
from .summary import FinishSummary, count
from .views import sync_command

if TYPE_CHECKING:
    from .handle import RunHandle

__all__ = ["finished", "quiet", "started"]

log = logging.getLogger("tracking_core.report")

#: Seconds the end-of-run block may spend counting what the journals still owe.
COUNT_BUDGET = 0.25
log.setLevel(logging.INFO)



class _Terminal(logging.Handler):
    """Writes the report's lines to this process's stderr while logging is not configured."""

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers or logging.getLogger("tracking_core").handlers:
            return  # the application's logging shows it (the record propagates there)
        try:
            stream = sys.stderr
            stream.write(record.getMessage() + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stderr must never reach training
            pass


if not any(isinstance(h, _Terminal) for h in log.handlers):
    log.addHandler(_Terminal())


# -- the quiet setting -------------------------------------------------------------------------
def quiet(args: Any = None) -> bool:
    """``--tracking-quiet`` (``args.tracking_quiet``), else ``$TRACKING_CORE_QUIET``."""
    value = getattr(args, "tracking_quiet", None)
    return settings.quiet() if value is None else bool(value)


# -- the start line ----------------------------------------------------------------------------
def started(handle: RunHandle, *, resumed: bool = False, args: Any = None) -> None:
    """Say where the run goes, per tracker (the lines ``tracking-core show`` and the demo give:
    :func:`tracking_core.viewers.where_to_look`). Never raises."""
    from .delivery.failures import forget

    forget()  # the failures this run's end counts are its own
    if quiet(args):
        return
    lines = _views_lines("where_to_look", handle, "where each tracker's data goes")
    trackers = ", ".join(handle.backends) or "no tracker"
    name = f" ({handle.name})" if handle.name and handle.name != handle.run_id else ""
    head = f"tracking-core: run {handle.run_id}{name} {'resumed' if resumed else 'started'} → {trackers}"
    log.info("%s", "\n".join([head, *(f"  {line}" for line in lines)]))


# -- the end -----------------------------------------------------------------------------------
def finished(summary: FinishSummary, handle: RunHandle, *, tracking_dir: str | os.PathLike[str], args: Any = None) -> None:
    """The primary's end of the run: one line when everything arrived, else one block that says
    which tracker lacks what, why, and the command that delivers it; then, where a tracker keeps
    the run only on this machine (an offline run), how to upload it (its plugin's
    ``tracker_sync``). Never raises."""
    try:
        upload = [f"  {line}" for line in _views_lines("sync_lines", handle, "how to upload the trackers' local data")]
        if not summary.drained:
            log.warning("%s", "\n".join([incomplete_block(summary, handle, tracking_dir), *upload]))
        elif summary.roles_without_writer or not quiet(args):  # values that went nowhere: always said
            level = logging.WARNING if summary.roles_without_writer else logging.INFO
            log.log(level, "%s", "\n".join([f"tracking-core: {summary.describe()}", *upload]))
    except Exception as exc:  # noqa: BLE001 - the summary is returned to the caller anyway
        log.warning("tracking-core: %s (the full report failed: %s: %s)", summary.describe(), type(exc).__name__, exc)


def _views_lines(function: str, handle: RunHandle, what: str) -> list[str]:
    """The lines of ``function`` of :mod:`tracking_core.viewers` (:func:`~tracking_core.viewers.where_to_look`,
    :func:`~tracking_core.viewers.sync_lines`), else one saying ``what`` could not be said: the
    run's start and its summary are said all the same."""
    try:
        from . import viewers

        return list(getattr(viewers, function)(handle))
    except Exception as exc:  # noqa: BLE001 - saying where must never stop a start or an end
        return [f"({what} could not be said: {type(exc).__name__}: {exc})"]


def incomplete_block(summary: FinishSummary, handle: RunHandle, tracking_dir: str | os.PathLike[str]) -> str:
    """The block said when a run ended with something undelivered (see :func:`finished`)."""
    from .delivery.failures import reported
    from .delivery.sync import owed_in
    from .delivery.writers import owing_text

    lines = [f"tracking-core: run {handle.run_id} {summary.status.value}, but its delivery is INCOMPLETE:"]
    # Counting reads the journals: a journal logged flat out takes seconds, and finish keeps its
    # bound, so the counting has a budget of its own (past it, the counts are lower bounds).
    deadline = time.monotonic() + COUNT_BUDGET
    own = owed_in(Path(summary.journal), deadline) if summary.journal else {}
    peers = [owed_in(Path(folder), deadline) for folder in summary.peers]
    replayed = {Path(folder).name for folder in summary.peers}  # a journal's folder is its writer's label
    for name, info in summary.backends.items():
        # the job's other writers whose journals were not replayed here (still delivering, or on
        # another node): what they said they logged and delivered, as the details line counts them
        others = [s for label, s in summary.job.get(name, {}).items() if label not in replayed]
        lines.append(f"  {name}: {tracker_line(name, info, summary.logged, own.get(name), peers, others)}")
    lines += [f"  {cause}" for cause in reported()]
    lines += [f"  another writer: {owing_text(info)}" for info in summary.writers.values()]
    kept = Path(tracking_dir) / "journal" / handle.run_id
    if summary.journal or summary.peers or not summary.writers:
        lines += [f"  what is missing is kept in {kept}; once the trackers can be reached, run:", f"    {sync_command(kept)}"]
    lines.append(f"  (details: {summary.describe()})")
    return "\n".join(lines)


def tracker_line(
    name: str,
    info: Mapping[str, Any],
    logged: int,
    own: Mapping[str, Any] | None,
    peers: list[dict[str, dict[str, Any]]],
    others: Sequence[Mapping[str, Any]] = (),
) -> str:
    """What one tracker lacks: values (this writer's, those of the other writers whose journals
    were replayed here, and those ``others`` said they logged and delivered), config sections not
    delivered, and whether the run was closed there. The values are counted as
    ``tracking-core sync`` counts what it then delivers."""
    delivered, total = int(info.get("delivered", 0)), logged
    for state in others:
        delivered += count(state.get("delivered"))
        total += count(state.get("journaled"))
    rejected = int(info.get("rejected", 0))
    configs = own["configs"] if own is not None and not own.get("partial") else len(info.get("missing_configs") or [])
    closed = bool(info.get("closed"))
    at_least = ""
    for owed in peers:
        theirs = owed.get(name)
        if theirs is None:
            continue
        if theirs.get("partial"):
            at_least = "at least "
        delivered += theirs["delivered"]
        rejected += theirs["rejected"]
        total += theirs["delivered"] + theirs["rejected"] + theirs["values"]
        configs += theirs["configs"]
        closed = closed and theirs["closed"]
    parts = [
        (True, f"{delivered} of {at_least}{total} values delivered"),
        (rejected, f"{rejected} rejected by the tracker"),
        (configs, f"{configs} config section(s) not delivered"),
        (not closed, "run not closed"),
        (info.get("left_out"), f"left out of delivery: {info.get('left_out')}"),
    ]
    return ", ".join(text for shown, text in parts if shown)
