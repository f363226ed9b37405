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
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .. import settings
from ..context import RunContext
from ..handle import HANDLE_FILE, RunHandle
from ..plugins import PluginManager, get_plugin_manager
from ..registry import BackendSpec
from .follower import Follower, FollowerBusy
from .journal import (
    FOLLOWER_LOCK,
    JOURNAL_DIR,
    WRITER_LOCK,
    find_journals,
    held,
    last_record,
    read_acks,
    read_meta,
)
from .plan import plain

log = logging.getLogger("tracking_core.sync")

#: Beyond its exit timeout, how long a delivery process finishing a dead writer's journal is
#: waited for.
DELIVERY_GRACE = 15.0
#: A peer's pump journals what it logged within its flush interval (0.5 s by default).
PUMP_GRACE = 0.7


class Refused(Exception):
    """The journal cannot be replayed without guessing where its records should go."""


@dataclass
class SyncReport:
    journals: int = 0
    records: int = 0
    opened: list[str] = field(default_factory=list)
    skipped_live: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    #: journal folder -> lines in it that were not records (cut or garbage), read past
    bad_lines: dict[str, int] = field(default_factory=dict)


def sync(path: str | os.PathLike[str], *, stream: TextIO | None = sys.stderr) -> SyncReport:
    """Replay every journal under ``path`` (a tracking directory, a run's journal folder, or one
    journal folder). ``FileNotFoundError`` when ``path`` does not exist."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist")
    report = SyncReport()
    manager = get_plugin_manager()
    journals = []
    for folder in find_journals(root):
        try:
            journals.append((folder, read_meta(folder)))
        except ValueError as exc:
            report.errors.append(str(exc))
    # The primary's journal first: it may have to open the run that the others attach to.
    journals.sort(key=lambda j: (not j[1].get("primary"), str(j[0])))
    handles: dict[str, RunHandle] = {}
    for folder, meta in journals:
        replay(folder, meta, manager, report, handles, stream=stream)
    return report


def replay(
    folder: Path,
    meta: dict[str, Any],
    manager: PluginManager,
    report: SyncReport,
    handles: dict[str, RunHandle],
    *,
    stream: TextIO | None,
    timeout: float | None = None,
) -> None:
    """Deliver one journal whose writer is gone (see the module doc)."""
    if held(folder / WRITER_LOCK):
        report.skipped_live.append(f"{folder}: its writer is still running")
        return
    report.journals += 1
    wait = 0.0
    if held(folder / FOLLOWER_LOCK):
        wait = settings.exit_timeout() + DELIVERY_GRACE
        if stream is not None:
            stream.write(f"waiting up to {wait:.0f} s for the process delivering {folder}\n")
    run_id = str(meta["handle"]["run_id"])
    handle = handles.get(run_id) or _saved_handle(meta)
    handles[run_id] = handle
    before = {name: p.delivered for name, p in read_acks(folder).items()}
    try:
        follower = _follower(folder, meta, handle, manager, report, wait)
    except FollowerBusy:
        report.skipped_live.append(f"{folder}: still being delivered by another process")
        return
    except Refused as exc:
        report.errors.append(str(exc))
        return
    if not folder.exists():  # finished by the process we waited for
        follower.stop()
        return
    follower.start()
    result = follower.finish(follower.replay_end(), timeout)
    report.records += sum(b["delivered"] - before.get(name, 0) for name, b in result["backends"].items())
    if result.get("bad_lines"):
        report.bad_lines[str(folder)] = int(result["bad_lines"])
    if result["outstanding"]:
        for name, what in result["outstanding"].items():
            report.errors.append(f"{folder}: {name} still lacks {what} (see the warnings above)")
    else:
        report.removed.append(str(folder))


def _saved_handle(meta: dict[str, Any]) -> RunHandle:
    """The run's saved handle (it knows which backends were opened), else the journal's copy."""
    recorded = RunHandle.from_mapping(meta["handle"])
    saved = recorded.run_dir / HANDLE_FILE
    if saved.exists():
        try:
            return RunHandle.parse(saved)
        except ValueError:
            pass
    return recorded


def _follower(
    folder: Path,
    meta: dict[str, Any],
    handle: RunHandle,
    manager: PluginManager,
    report: SyncReport,
    lock_timeout: float,
) -> Follower:
    names = [str(n) for n in meta.get("backends") or []]
    specs = manager.select(names)
    primary = bool(meta.get("primary"))
    recorded = RunHandle.from_mapping(meta["handle"])
    entries, actions = {}, {}
    for spec in specs:
        entry, opened = _entry(spec, handle, recorded, folder)
        entries[spec.name] = entry
        actions[spec.name] = "attach" if opened or not primary else "open"

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

    contexts = {
        spec.name: RunContext(
            backend=spec.name,
            run_id=handle.run_id,
            name=handle.name,
            primary=primary,
            tracking_dir=Path(handle.tracking_dir),
            role=meta.get("role"),
            label=f"sync-{meta.get('label', 'unknown')}",
            options=dict(meta.get("options") or {}),
            resume=True,
        )
        for spec in specs
    }
    return Follower(
        folder,
        specs=specs,
        contexts=contexts,
        entries=entries,
        actions=actions,
        manager=manager,
        prefix=str(meta.get("prefix") or ""),
        poll=0.2,
        on_opened=on_opened,
        lock_timeout=lock_timeout,
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


def await_peers(tracking_dir: str, run_id: str, own: Path | None, deadline: float) -> list[str]:
    """A finishing primary waits, until ``deadline``, for the other live writers of its run on
    this node to deliver what they logged, and replays the journals of those already gone.
    Returns the journals still unsettled at the deadline."""
    folder = Path(tracking_dir) / JOURNAL_DIR / run_id
    if not folder.is_dir():
        return []
    live: list[Path] = []
    manager: PluginManager | None = None
    handles: dict[str, RunHandle] = {}
    for journal in _others(find_journals(folder), own):
        if held(journal / WRITER_LOCK) or held(journal / FOLLOWER_LOCK):
            live.append(journal)
            continue
        try:
            meta = read_meta(journal)
        except ValueError:
            continue
        manager = manager or get_plugin_manager()
        report = SyncReport()
        replay(journal, meta, manager, report, handles, stream=None, timeout=max(0.0, deadline - time.monotonic()))
        for error in report.errors:
            log.warning("could not replay %s before closing the run: %s", journal.name, error)
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
    return [str(j) for j in live]


def _others(journals: Iterable[Path], own: Path | None) -> list[Path]:
    return [j for j in journals if own is None or j.resolve() != own.resolve()]


def _settled(journal: Path) -> bool:
    """Everything the writer journaled so far is done by every backend."""
    try:
        backends = [str(b) for b in read_meta(journal).get("backends") or []]
    except ValueError:
        return True
    last = last_record(journal)
    progress = read_acks(journal)
    return all(name in progress and progress[name].n >= last for name in backends)
