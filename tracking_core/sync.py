"""``tracking-core sync``: replay journals left by crashed, killed or offline runs.

Each journal says which records and configs every backend acknowledged; sync sends each backend
only what it lacks, appends the acknowledgements to the journal (so a second sync adds nothing)
and removes journals that are complete. A run that never reached a backend (its entry in the run
handle is ``pending``) is opened there first, once, and the saved handle is updated. Sync holds
each journal's lock while it replays it. A journal whose writing process still runs is left
alone; one whose writer is gone while its delivery process still delivers it (after a SIGKILL) is
waited for, at most that process's exit timeout and a little more.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .context import RunContext
from .dispatch import MAX_BATCH, expand
from .handle import HANDLE_FILE, RunHandle
from .journal import (
    JournalReader,
    JournalState,
    claim,
    find_journals,
    pid_alive,
    read_journal,
    section_from_dict,
)
from .lifecycle import exit_timeout
from .plugins import get_plugin_manager
from .records import RunStatus
from .slots import BackendSlot

log = logging.getLogger("tracking_core.sync")

#: Beyond its exit timeout, how long a delivery process finishing a dead writer's journal is waited for.
DELIVERY_GRACE = 15.0


@dataclass
class SyncReport:
    journals: int = 0
    records: int = 0
    configs: int = 0
    opened: list[str] = field(default_factory=list)
    skipped_live: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


class _Progress:
    def __init__(self, total: int, stream: TextIO | None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream

    def advance(self, n: int, label: str) -> None:
        self.done += n
        if self.stream is None or not self.total:
            return
        width = 30
        filled = int(width * self.done / self.total)
        self.stream.write(
            f"\rsync [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} records"
            f"  {label[:40]:<40}"
        )
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self.total:
            self.stream.write("\n")


def _handle_for(state: JournalState) -> RunHandle:
    recorded = RunHandle.from_mapping(state.meta["handle"])
    saved = recorded.run_dir / HANDLE_FILE
    if saved.exists():
        try:
            return RunHandle.parse(saved)
        except ValueError:
            pass
    return recorded


def _context(state: JournalState, handle: RunHandle, backend: str, *, primary: bool) -> RunContext:
    return RunContext(
        backend=backend,
        run_id=handle.run_id,
        name=handle.name,
        primary=primary,
        tracking_dir=Path(handle.tracking_dir),
        role=state.meta.get("role"),
        label=f"sync-{state.meta.get('label', 'unknown')}",
        options=dict(state.meta.get("options") or {}),
        resume=True,
    )


def _complete(state: JournalState) -> bool:
    for backend in state.backends:
        if state.pending_rows(backend) or state.pending_configs(backend):
            return False
        if state.meta.get("primary") and not state.closed_for(backend):
            return False
    return True


def sync(path: str | os.PathLike[str], *, stream: TextIO | None = sys.stderr) -> SyncReport:
    """Replay every journal under ``path`` (a tracking directory, a run's journal folder or one
    journal file) to the backends that lack its records."""
    report = SyncReport()
    manager = get_plugin_manager()
    states: list[JournalState] = []
    held: list[int] = []
    try:
        for file in find_journals(Path(path)):
            fd = _claim(file, stream)
            if fd is None:
                report.skipped_live.append(str(file))
                continue
            held.append(fd)
            try:
                state = read_journal(file)
            except (OSError, ValueError) as exc:
                report.errors.append(f"{file}: unreadable journal ({exc})")
                continue
            if state.meta:
                states.append(state)
        _replay(states, manager, report, stream)
    finally:
        for fd in held:
            os.close(fd)
    return report


def _claim(file: Path, stream: TextIO | None) -> int | None:
    """Hold the journal's lock for the replay. A journal whose writer is gone but whose delivery
    process still delivers it (after a SIGKILL) is waited for, as long as that process may take;
    one whose writer still runs is left alone."""
    try:
        fd = claim(file)
    except OSError:
        return None
    if fd is not None:
        return fd
    try:
        state = read_journal(file)
    except (OSError, ValueError):
        return None
    writer = state.meta.get("pid")
    same_host = state.meta.get("host") == socket.gethostname()
    if not same_host or writer is None or pid_alive(int(writer)):
        return None
    helper = state.delivery_pids[-1] if state.delivery_pids else None
    if helper is None or not pid_alive(helper):
        return None
    wait = exit_timeout() + DELIVERY_GRACE
    if stream is not None:
        stream.write(
            f"waiting up to {wait:.0f} s for delivery process {helper} to finish {file.name} "
            f"(its training process {writer} is gone)\n"
        )
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        time.sleep(0.2)
        fd = claim(file) if file.exists() else None
        if fd is not None or not file.exists():
            return fd
    return None


def _replay(states: list[JournalState], manager: Any, report: SyncReport, stream: TextIO | None) -> None:
    # The primary's journal first: it may have to open the run that the others attach to.
    states.sort(key=lambda s: (not s.meta.get("primary"), str(s.path)))
    total = sum(
        len(row[2]) for s in states for b in s.backends for row in s.pending_rows(b)
    )
    progress = _Progress(total, stream)
    handles: dict[str, RunHandle] = {}
    for state in states:
        report.journals += 1
        run_id = state.meta["handle"]["run_id"]
        handle = handles.setdefault(run_id, _handle_for(state))
        for backend in state.backends:
            try:
                _sync_backend(state, handle, backend, manager, report, progress)
            except Exception as exc:  # noqa: BLE001 - one backend's failure is reported, not fatal
                report.errors.append(f"{state.path.name} -> {backend}: {type(exc).__name__}: {exc}")
        final = read_journal(state.path)
        if _complete(final):
            state.path.unlink()
            report.removed.append(str(state.path))
    progress.close()


def _sync_backend(
    state: JournalState,
    handle: RunHandle,
    backend: str,
    manager: Any,
    report: SyncReport,
    progress: _Progress,
) -> None:
    rows = state.pending_rows(backend)
    configs = state.pending_configs(backend)
    is_primary = bool(state.meta.get("primary"))
    close = is_primary and not state.closed_for(backend)
    if not rows and not configs and not close:
        return
    spec = manager.select([backend])[0]
    entry = handle.backends.get(backend) or {}
    if not entry or entry.get("pending"):
        # The run never reached this backend: open it (once), as its primary would have. When
        # this is a secondary's journal the run stays open: the primary's journal closes it.
        opener = BackendSlot(spec, _context(state, handle, backend, primary=True), manager)
        try:
            result = opener.call("open_run", run=opener.context)
        finally:
            if not is_primary:
                opener.release()
        entry = json.loads(json.dumps(dict(result or {}), default=str))
        handle.backends[backend] = entry
        handle.save()
        report.opened.append(f"{handle.run_id}:{backend}")
        slot = opener if is_primary else None
    else:
        slot = None
    if slot is None:
        slot = BackendSlot(spec, _context(state, handle, backend, primary=is_primary), manager)
        slot.call("attach_run", run=slot.context, attach=entry)
    acks = JournalReader(state.path)
    try:
        for config_id, section in configs:
            data = section_from_dict(section)
            slot.call("log_config", config=data, role=data.role, run=slot.context)
            acks.ack_config(backend, config_id)
            report.configs += 1
        prefix = state.meta.get("prefix", "")
        role = state.meta.get("role")
        records = expand(rows, prefix, role)
        size = spec.max_batch or MAX_BATCH
        for start in range(0, len(records), size):
            batch = records[start : start + size]
            slot.call("log_metrics", records=batch, run=slot.context)
            acks.ack(backend, batch[-1].seq)
            report.records += len(batch)
            progress.advance(len(batch), f"{backend} {state.path.name}")
        status = RunStatus(state.status) if state.status else RunStatus.KILLED
        slot.call("close_run", status=status if is_primary else RunStatus.FINISHED, run=slot.context)
        if close:
            acks.ack_config(backend, "close")
    finally:
        acks.close()
        slot.release()
