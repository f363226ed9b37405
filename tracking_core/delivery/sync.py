"""``tracking-core sync``: deliver the journals that crashed, killed or offline runs left behind.

Each journal is delivered by the same :class:`~tracking_core.delivery.follower.Follower` as a live
run, to the targets its run recorded (never to wherever this shell's environment points): each
backend gets only what its acknowledgements say it lacks, a journal whose writer died before its
end gets the end (KILLED), and the one completion rule decides whether the journal is removed. A
run never opened in a backend is opened there first, from the primary's journal, and the saved
handle is updated. A journal whose writer still runs is left alone; one whose delivery process is
still finishing it (after its writer was killed) is waited for, at most that process's exit
timeout and a little more. A backend that is down gives up after one probe: run sync again later.

:func:`await_peers` is a finishing primary's use of the same replay for the other writers of its
run on this node.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from ..context import RunContext
from ..handle import HANDLE_FILE, RunHandle, rebase, run_folder
from ..names import path_part
from ..plugins import PluginManager, get_plugin_manager
from ..registry import BackendSpec
from ..views import sync_command
from . import kinds
from .entries import decode
from .follower import Follower, FollowerBusy, JournalGone, take_over
from .isolation import PROGRESS_EVERY, replay_apart
from .journal import (
    FOLLOWER_LOCK,
    JOURNAL_DIR,
    META,
    WRITER_LOCK,
    SegmentReader,
    find_journals,
    held,
    last_record,
    read_acks,
    read_meta,
)
from .plan import BackendPlan, Plan, context_to_dict, plain
from .progress import Progress
from .writers import identity

log = logging.getLogger("tracking_core.sync")


#: How long ``tracking-core sync`` may take in all (``--timeout``): waiting for a process that is
#: delivering a journal, and every tracker's delivery. What is not done by then stays.
DEFAULT_TIMEOUT = 300.0
#: The longest ``--timeout`` taken: a week (what is not delivered by then stays for the next sync).
MAX_TIMEOUT = 7 * 86400.0
#: A peer's pump journals what it logged within its flush interval (0.5 s by default).
PUMP_GRACE = 0.7


def sync_timeout(text: str) -> float:
    """``--timeout``'s seconds: a number more than 0 and at most :data:`MAX_TIMEOUT`;
    ``ValueError`` saying what it takes otherwise (infinite, NaN, negative, not a number)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0.0 < seconds <= MAX_TIMEOUT:
        raise ValueError(
            f"--timeout {text} is not a time sync can wait: give the seconds it may take, more than 0 "
            f"and at most {MAX_TIMEOUT:.0f} (a week; default {DEFAULT_TIMEOUT:.0f})"
        )
    return seconds


class Refused(Exception):
    """The journal cannot be replayed without guessing where its records should go."""


class NoTrackingData(FileNotFoundError):
    """The path sync was pointed at holds no tracking data: no journal, and not a tracking
    directory (one whose journals were all delivered has ``runs/``, or an empty ``journal/``)."""


def holds_tracking_data(root: Path) -> bool:
    """Whether ``root`` is a tracking directory (``journal/`` or ``runs/`` in it), a spill
    location laid out like one, a run's journal folder or a journal folder."""
    if (root / JOURNAL_DIR).is_dir() or (root / "runs").is_dir():
        return True
    return next(iter(find_journals(root)), None) is not None


@dataclass
class SyncReport:
    """What a sync did. ``records`` is the number of values delivered, all trackers together;
    ``delivered`` and ``rejected`` say it per tracker, counted as a run's finish summary counts
    the values it did not deliver (each metric value, each table, histogram, text and artifact;
    not config sections nor the close): a summary's "N NOT delivered" for a tracker is what a
    sync then delivers to it plus what that tracker rejects. ``configs`` counts the config
    sections delivered per tracker, as the summary counts those it owes (both from the
    journal's :class:`~.progress.BackendProgress`)."""

    journals: int = 0
    records: int = 0
    delivered: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    configs: dict[str, int] = field(default_factory=dict)
    opened: list[str] = field(default_factory=list)
    skipped_live: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    #: journals the process that was delivering them finished while this sync waited
    finished_elsewhere: list[str] = field(default_factory=list)
    #: journal folder -> lines in it that were not records (cut or garbage), read past
    bad_lines: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, delivered: int, rejected: int, configs: int = 0) -> None:
        """Count one tracker's progress through one journal (see :meth:`.BackendProgress.since`)."""
        self.records += delivered
        self.delivered[name] = self.delivered.get(name, 0) + delivered
        for counts, value in ((self.rejected, rejected), (self.configs, configs)):
            if value > 0:
                counts[name] = counts.get(name, 0) + value

    def tracker_lines(self) -> list[str]:
        """One line per tracker this sync delivered to (values or config sections) or whose
        values it rejected."""
        lines = []
        for name in sorted(set(self.delivered) | set(self.rejected) | set(self.configs)):
            delivered, rejected, configs = (counts.get(name, 0) for counts in (self.delivered, self.rejected, self.configs))
            if not (delivered or rejected or configs):
                continue  # it lacked nothing
            text = f"{name}: {delivered} values delivered"
            if rejected:
                text += f", {rejected} rejected by the tracker (see the warnings above)"
            if configs:
                text += f", {configs} config section(s) delivered"
            lines.append(text)
        return lines


def sync(
    path: str | os.PathLike[str],
    *,
    stream: TextIO | None = sys.stderr,
    timeout: float = DEFAULT_TIMEOUT,
    isolate: bool = True,
) -> SyncReport:
    """Replay every journal under ``path`` (a tracking directory, a run's journal folder, or one
    journal folder) within ``timeout`` seconds, each backend in a process of its own
    (``isolate``; otherwise on threads of this process). ``FileNotFoundError`` when ``path``
    does not exist, :class:`NoTrackingData` when it holds no tracking data."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist")
    if not holds_tracking_data(root):
        raise NoTrackingData(
            f"{root} holds no tracking data: it is not a tracking directory (no {JOURNAL_DIR}/ or "
            "runs/ folder in it) and no journal is under it"
        )
    deadline = time.monotonic() + timeout
    report = SyncReport()
    manager = get_plugin_manager()
    journals = []
    for folder in find_journals(root):
        try:
            meta = read_meta(folder)
            if not _delivered_with(meta):
                journals.append((folder, meta))
        except ValueError as exc:
            if (folder / META).exists():
                report.errors.append(str(exc))
            else:  # removed since it was found: its follower finished it
                report.finished_elsewhere.append(str(folder))
    # The primary's journal first: it may have to open the run that the others attach to.
    journals.sort(key=lambda j: (not j[1].get("primary"), str(j[0])))
    handles: dict[str, RunHandle] = {}
    for folder, meta in journals:
        replay(folder, meta, manager, report, handles, stream=stream, deadline=deadline, isolate=isolate)
    return report


def replay(
    folder: Path,
    meta: dict[str, Any],
    manager: PluginManager,
    report: SyncReport,
    handles: dict[str, RunHandle],
    *,
    stream: TextIO | None,
    deadline: float,
    isolate: bool = False,
) -> None:
    """Deliver one journal whose writer is gone, by ``deadline`` (see the module doc)."""
    if held(folder / WRITER_LOCK):
        report.skipped_live.append(f"{folder}: its writer is still running")
        return
    report.journals += 1
    lock_fd = _take_over(folder, report, stream, deadline)
    if lock_fd is None:
        return
    run_id = str(meta["handle"]["run_id"])
    handle = handles[run_id] = handles.get(run_id) or _saved_handle(meta)
    before = read_acks(folder)
    try:
        plan, on_opened = _setup(folder, meta, handle, manager, report)
    except Refused as exc:
        os.close(lock_fd)
        report.errors.append(str(exc))
        return
    say = _say(stream)
    say(f"delivering {folder} to {', '.join(b.name for b in plan.backends)}")
    # Why a backend still lacks something, after what it lacks.
    why: dict[str, str] = {}
    if isolate:  # each backend in a process of its own (see .isolation)
        timeout = max(0.0, deadline - time.monotonic())
        try:
            missing, outcomes, progress = replay_apart(plan, lock_fd, deadline, on_opened, say=say)
        finally:
            os.close(lock_fd)
        bad = max((int((o.report or {}).get("bad_lines") or 0) for o in outcomes.values()), default=0)
        why = {name: f": {o.why(timeout) or 'see the warnings above'}" for name, o in outcomes.items()}
    else:
        follower = Follower(plan, manager, on_opened=on_opened, lock_fd=lock_fd)
        follower.start()
        result = follower.finish(follower.replay_end(), max(0.0, deadline - time.monotonic()))
        missing, progress, bad = result["outstanding"], follower.acks.progress, int(result["bad_lines"])
    for name, p in progress.items():
        report.add(name, *p.since(before.get(name)))
    if bad:
        report.bad_lines[str(folder)] = bad
    if not missing:
        report.removed.append(str(folder))
    for name, what in missing.items():
        report.errors.append(f"{folder}: {name} still lacks {what}{why.get(name, ' (see the warnings above)')}")


def _take_over(folder: Path, report: SyncReport, stream: TextIO | None, deadline: float) -> int | None:
    """The journal's lock, waiting for a process that is delivering it (its writer's delivery
    process, finishing after a kill, or another sync) at most until ``deadline``; None when that
    process finished the journal meanwhile (nothing left to do) or still holds it then."""
    wait = max(0.0, deadline - time.monotonic())
    say = _say(stream if held(folder / FOLLOWER_LOCK) else None)
    say(f"waiting up to {wait:.0f} s for the process delivering {folder}")
    try:
        while True:  # in steps, each followed by a line: a long wait is never a silent one
            try:
                return take_over(folder, min(PROGRESS_EVERY, max(0.0, deadline - time.monotonic())))
            except FollowerBusy:
                if time.monotonic() >= deadline:
                    raise
                say(f"still waiting for the process delivering {folder} ({deadline - time.monotonic():.0f} s left)")
    except JournalGone:
        report.finished_elsewhere.append(str(folder))
    except FollowerBusy:
        report.errors.append(
            f"{folder}: another process was still delivering it after {wait:.0f} s; run "
            f"`{sync_command(folder)}` again later"
        )
    return None


def _say(stream: TextIO | None) -> Callable[[str], None]:
    """Lines to ``stream`` as they are said (None: said nowhere)."""

    def say(text: str) -> None:
        if stream is not None:
            stream.write(text + "\n")
            stream.flush()

    return say


def _delivered_with(meta: dict[str, Any]) -> bool:
    """Whether this is a spill journal (see :mod:`.intake`) whose journal is still there: it is
    delivered with that journal, which names it, in record order."""
    journal = meta.get("spill_of")
    return isinstance(journal, str) and (Path(journal) / META).exists()


def _local(meta: dict[str, Any], recorded: RunHandle) -> Path:
    """The tracking directory of the journal's writer (its own; a journal written before
    each writer recorded it: the handle's)."""
    return Path(str(meta.get("tracking_dir") or recorded.tracking_dir))


def _saved_handle(meta: dict[str, Any]) -> RunHandle:
    """The run's saved handle (it knows which backends were opened) in the writer's tracking
    directory, else in the primary's (the same one on the primary's host), else the journal's
    copy."""
    recorded = RunHandle.from_mapping(meta["handle"])
    for saved in (run_folder(_local(meta, recorded), recorded.run_id) / HANDLE_FILE, recorded.run_dir / HANDLE_FILE):
        if saved.exists():
            try:
                return RunHandle.parse(saved)
            except ValueError:
                pass
    return recorded


def _setup(
    folder: Path, meta: dict[str, Any], handle: RunHandle, manager: PluginManager, report: SyncReport
) -> tuple[Plan, Callable[[str, Any], None]]:
    """What delivering one journal takes, from its meta and the run's handle: its plan, and
    what hears a run opened in a backend."""
    names = [str(n) for n in meta.get("backends") or []]
    primary = bool(meta.get("primary"))
    recorded = RunHandle.from_mapping(meta["handle"])
    local = _local(meta, recorded)
    writer = _writer(meta, str(local))
    context = RunContext(
        backend="",
        run_id=handle.run_id,
        name=handle.name,
        primary=primary,
        tracking_dir=local,
        role=meta.get("role"),
        label=f"sync-{meta.get('label', 'unknown')}",
        options=dict(meta.get("options") or {}),
        resume=True,
        started_at=meta.get("created"),
    )
    plan = Plan(folder=str(folder), prefix=str(meta.get("prefix") or ""), poll=0.2)
    for spec in manager.select(names):
        entry, opened = _entry(spec, handle, recorded, folder)
        # The targets' paths under the primary's directory are the writer's under its own.
        for primary_dir in {recorded.tracking_dir, handle.tracking_dir}:
            entry = rebase(entry, primary_dir, str(local))
        action = "attach" if opened or not primary else "open"
        backend = context_to_dict(replace(context, backend=spec.name))
        plan.backends.append(BackendPlan(spec.name, backend, action, entry, writer=writer))

    def on_opened(name: str, result: Any) -> None:
        if not primary or name not in handle.pending:
            return
        handle.backends[name] = plain(dict(result or {}))
        handle.pending.remove(name)
        try:
            handle.save()
        except OSError as exc:
            log.warning("could not save the run handle %s: %s", handle.run_dir, exc)
        report.opened.append(f"{handle.run_id}:{name}")

    return plan, on_opened


def _writer(meta: dict[str, Any], tracking_dir: str) -> dict[str, Any]:
    """Who wrote the journal, for the job's writer registry (its rank from its label,
    ``<role>-r<rank>-p<pid>``: the journal records no rank of its own)."""
    label = str(meta.get("label") or "unknown")
    rank = re.search(r"-r(\d+)-p\d+$", label)
    pid = meta.get("pid")
    return identity(
        label=label,
        role=meta.get("role"),
        rank=int(rank.group(1)) if rank else None,
        pid=pid if isinstance(pid, int) else None,
        tracking_dir=tracking_dir,
        host=str(meta.get("host") or "") or None,
    )


def _entry(spec: BackendSpec, handle: RunHandle, recorded: RunHandle, folder: Path) -> tuple[dict[str, Any], bool]:
    """The backend's handle entry and whether the run was opened there."""
    if spec.name in handle.backends and spec.name not in handle.pending:
        return dict(handle.backends[spec.name]), True
    entry = dict(recorded.backends.get(spec.name) or handle.backends.get(spec.name) or {})
    error = entry.pop("target_error", None)
    if error is not None or (not entry and spec.target is not None):
        raise Refused(
            f"{folder}: cannot replay to {spec.name!r}: the run was never opened there and where "
            f"it should go was not recorded ({error or 'no target'}); start the job's run again "
            "with the tracker reachable, or remove this journal"
        )
    return entry, False


def await_peers(tracking_dir: str, run_id: str, own: Path | None, deadline: float) -> dict[str, str]:
    """A finishing primary waits, until ``deadline``, for the other live writers of its run on
    this node to deliver what they logged, and replays the journals of those already gone.

    Returns the peers' journals it replayed and could not complete, each with what is missing
    where: the run's summary must not say it drained while they lack anything (they stay for
    ``tracking-core sync``). Live writers still delivering at the deadline are only warned about:
    their own finish reports what they deliver."""
    folder = Path(tracking_dir) / JOURNAL_DIR / path_part(run_id, "run id")
    if not folder.is_dir():
        return {}
    missing: dict[str, str] = {}
    live: list[Path] = []
    manager: PluginManager | None = None
    handles: dict[str, RunHandle] = {}
    for journal in find_journals(folder):
        if own is not None and journal.resolve() == own.resolve():
            continue
        if held(journal / WRITER_LOCK) or held(journal / FOLLOWER_LOCK):
            live.append(journal)
            continue
        try:
            meta = read_meta(journal)
        except ValueError:
            continue
        manager = manager or get_plugin_manager()
        report = SyncReport()
        replay(journal, meta, manager, report, handles, stream=None, deadline=deadline)
        for error in report.errors:
            log.info("could not replay %s before closing the run: %s", journal.name, error)  # the summary says it
        if report.errors:
            missing[str(journal)] = "; ".join(e.removeprefix(f"{journal}: ") for e in report.errors)
    # What a peer logged before now reaches its journal within one flush interval (its pump's):
    # judge it only after that.
    if live:
        time.sleep(max(0.0, min(PUMP_GRACE, deadline - time.monotonic())))
    while live and time.monotonic() < deadline:
        live = [j for j in live if j.exists() and not _settled(j)]
        if live:
            time.sleep(0.1)
    if live:
        log.warning(
            "closing the run while %d writer(s) still deliver: %s",
            len(live),
            ", ".join(j.name for j in live),
        )
    return missing


def _settled(journal: Path) -> bool:
    """Every backend has handled everything the writer journaled so far: waiting longer
    brings nothing (a config section a backend refused is owed to ``tracking-core sync``,
    and the peer's own finish says so)."""
    progress = _progress_of(journal)
    return progress is None or progress.reached(last_record(journal))


def _progress_of(folder: Path) -> Progress | None:
    """Every backend's progress through the journal (None: its ``meta.json`` cannot be read)."""
    try:
        names = [str(b) for b in read_meta(folder).get("backends") or []]
    except ValueError:
        return None
    return Progress(read_acks(folder), names)


def owed_in(folder: Path, deadline: float | None = None) -> dict[str, dict[str, Any]]:
    """What each backend of a journal still lacks, counted as a finish summary and a sync count
    it: ``values`` (metric values and rich records not yet done), ``configs`` (config sections
    not delivered: not reached yet, or refused), ``closed`` (its end done), with the
    ``delivered`` and ``rejected`` values its acknowledgements record. Empty when the journal
    cannot be read. Counting reads the whole journal: past ``deadline`` (``time.monotonic()``)
    it stops, and ``partial`` is true (the counts are then lower bounds)."""
    progress = _progress_of(folder)
    if progress is None:
        return {}
    out = {}
    for name in progress.names:
        p = progress.of(name)
        out[name] = {
            "values": 0,
            "configs": 0,
            "closed": False,
            "delivered": p.delivered,
            "rejected": p.rejected,
            "partial": False,
        }
    reader = SegmentReader(folder)
    try:
        while True:
            if deadline is not None and time.monotonic() > deadline:
                for counts in out.values():
                    counts["partial"] = True
                break
            records = reader.read(1_000 if deadline is not None else 10_000, final=True)
            if not records:
                break
            for record in records:
                entry = decode(record)
                kind = kinds.of(entry)
                values = kind.values(entry)
                for name, counts in out.items():
                    if progress.done(name, entry.n):
                        counts["closed"] |= kind.closes
                    elif kind.owed:
                        counts["configs"] += 1
                    else:
                        counts["values"] += values
    finally:
        reader.close()
    return out
