"""The follower: delivers one journal to every backend of its writer, the same way everywhere.

The same :class:`Follower` runs in the writer's delivery process, on a thread of the writer
(``--tracking-delivery thread``), and in ``tracking-core sync``. It holds the journal's
``follower.lock`` for as long as it delivers, gives each backend a
:class:`~tracking_core.delivery.worker.BackendWorker` that reads the journal at its own pace (a
slow or dead tracker never holds up another), saves the acknowledgements, deletes segments every
backend is done with while the run goes on, and at the end applies the one completion rule
(:meth:`~tracking_core.delivery.progress.Progress.outstanding`): the journal folder is removed only when
nothing is outstanding; otherwise it stays for ``tracking-core sync`` and the report says what
is missing where. The completion rule always counts every backend of the journal: one *left out*
here (it crashed the delivery process, or ``tracking-core sync`` delivers it in a process of its
own) still keeps the journal until it has everything.

Taking a journal over from a follower that is finishing it (:func:`take_over`) is part of the
job: that follower removes a complete journal before it lets go of the lock, its ``meta.json``
first, so whoever gets the lock next finds either a journal to deliver or none
(:class:`JournalGone`), never a half-removed one.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..files import close_quietly, replace_text
from ..plugins import PluginManager
from . import snapshot
from .journal import (
    FOLLOWER_LOCK,
    META,
    Acks,
    append_end,
    copy_segment,
    first_record,
    read_meta,
    remove,
    scan,
    segment_name,
    segments,
    try_lock,
)
from .plan import Plan, context_from_dict
from .progress import Progress
from .stream import Message, Stream
from .worker import BackendSlot, BackendWorker

log = logging.getLogger("tracking_core.delivery")

#: How often acknowledgements are saved and finished segments deleted.
HOUSEKEEPING = 1.0
#: Of a finish's time, what a primary waiting for the job's other writers keeps for its close.
CLOSE_RESERVE = 2.0


class FollowerBusy(RuntimeError):
    """Another process delivers this journal."""


class JournalGone(RuntimeError):
    """The journal is no more: the follower that held it delivered everything and removed it."""


def take_over(folder: Path, timeout: float) -> int:
    """The journal's ``follower.lock``, waiting up to ``timeout`` for a follower that holds it:
    the descriptor holding the lock. :class:`JournalGone` when that follower finished the journal
    meanwhile (it removes ``meta.json`` first, before the lock file), :class:`FollowerBusy` when
    it still holds the lock at the deadline.

    A lock taken on a file that is no longer the folder's lock file (removed under us while we
    opened it) or in a folder without ``meta.json`` protects nothing: it is let go of."""
    deadline = time.monotonic() + timeout
    path = folder / FOLLOWER_LOCK
    while True:
        try:
            if not (folder / META).exists():
                raise FileNotFoundError(folder / META)
            fd = try_lock(path)
        except FileNotFoundError:
            raise JournalGone(f"{folder} was delivered and removed by the process that held it") from None
        if fd is not None:
            if (folder / META).exists() and _is_file(fd, path):
                return fd
            os.close(fd)
            if not (folder / META).exists():
                remove(folder)  # a lock file this process re-created in a retired journal
            continue
        if time.monotonic() >= deadline:
            raise FollowerBusy(f"another process is still delivering the journal {folder}")
        time.sleep(0.05)


def _is_file(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is the file at ``path`` now."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def retire(folder: Path) -> None:
    """Remove a complete journal, ``meta.json`` first: from then on it is no journal to anyone
    waiting for its lock (see :func:`take_over`); and its spill journal, if it has one."""
    spill = spill_of(folder)
    try:
        (folder / META).unlink(missing_ok=True)
    except OSError:
        return  # it stays whole, and a later sync finds it complete
    remove(folder)
    if spill is not None:
        remove(spill)


def end_of(folder: Path, status: str) -> int:
    """The number of the end record of a journal whose writer is gone: the one it journaled
    (in the journal or its spill journal), else one journaled now with ``status`` after the
    last record, where the writer wrote last."""
    last, end, _ = scan(folder)
    spill = spill_of(folder)
    if end is None and spill is not None and spill.is_dir():
        spill_last, end, _ = scan(spill)
        if spill_last > last:  # the writer wrote last there
            folder, last = spill, spill_last
    if end is None:
        end = last + 1
        append_end(folder, end, status)
    return end


class Follower:
    """Delivers the journal of ``plan`` (its ``folder`` None: records arrive only in memory).

    ``lock_fd``: the journal's lock, already taken (:func:`take_over`); otherwise it is taken
    here, waiting up to ``lock_timeout``. The plan's ``left_out``: backends of the journal that
    get no worker here, and why; they count for the completion rule and show in the report.
    ``owner`` (not a ``replay`` plan): this follower deletes finished segments and, at the end,
    the complete journal (a process that delivers one backend for ``tracking-core sync`` is no
    owner: the sync decides). ``acks``:
    where progress goes (default: the journal's ``acks.json``). ``on_call(backend, hook)`` hears
    each tracker call begin, ``on_call(backend, None)`` its end."""

    def __init__(
        self,
        plan: Plan,
        manager: PluginManager,
        *,
        on_opened: Callable[[str, Any], None] | None = None,
        lock_timeout: float = 0.0,
        lock_fd: int | None = None,
        acks: Acks | None = None,
        on_call: Callable[[str, str | None], None] | None = None,
    ) -> None:
        self.plan = plan
        self.folder = folder = Path(plan.folder) if plan.folder else None
        self.spill = spill_of(folder)
        if lock_fd is None and folder is not None:
            lock_fd = take_over(folder, lock_timeout)
        self._lock_fd = lock_fd
        names = [b.name for b in plan.backends]
        self.left_out = {name: why for name, why in plan.left_out.items() if name not in names}
        self.owner = not plan.replay
        self.names = names + list(self.left_out)
        self.acks = acks or Acks(folder, self.names)
        start = self.progress().done_through()
        self.workers = {
            b.name: BackendWorker(
                BackendSlot(spec, context_from_dict(b.context), manager, on_call=on_call),
                plan,
                b,
                Stream(folder, spill=self.spill, start=start),
                self.acks,
                on_opened,
            )
            for b, spec in zip(plan.backends, manager.select(names), strict=True)
        }
        self.end_n: int | None = None
        self._replaying = False  # the writer is gone: nobody waits on this follower's finish
        self.finished: dict[str, Any] | None = None
        self._first_n: dict[str, int] = {}  # a segment's path -> its first record
        self._stop = threading.Event()
        self._finishing = threading.Lock()  # one finish, whoever asks (a request, the orphan path)
        self._guard = threading.Lock()  # the lock descriptor: swapped by _relock, closed at the end
        self._meta = _read_text(folder / META) if folder is not None else None  # see _restore
        self._housekeeper = threading.Thread(
            target=self._housekeeping, name="tracking-core-follower", daemon=True
        )

    def start(self) -> Follower:
        for worker in self.workers.values():
            worker.start()
        self._housekeeper.start()
        return self

    # -- input ------------------------------------------------------------------------------
    def feed(self, message: Message) -> None:
        """Records the writer could not journal, or a switch between journal and memory."""
        for worker in self.workers.values():
            worker.stream.put(message)
        self.wake()

    def wake(self) -> None:
        for worker in self.workers.values():
            worker.wake()

    # -- waiting ------------------------------------------------------------------------------
    def drain(self, target_n: int, timeout: float | None, *, wait_for_open: bool = True) -> bool:
        """Wait until every backend has done every record up to ``target_n`` (False when
        ``timeout`` runs out, or a backend is down: see ``BackendWorker.drain``). A flush waits
        for the primary to open the run (``wait_for_open``); a finish hands what is left then
        to the primary's journal replay instead."""
        deadline = None if timeout is None else time.monotonic() + timeout
        ok = True
        for worker in self.workers.values():
            ok = worker.drain(target_n, deadline, wait_for_open=wait_for_open) and ok
        return ok and not self.left_out  # a backend left out gets nothing here

    def replay_end(self, status: str = "KILLED") -> int:
        """The writer is gone: read the journal to its end, journal its end if it died before
        doing so, and return the end's record number (the one finished with, once finished)."""
        assert self.folder is not None
        with self._finishing:
            if self.finished is not None and self.end_n is not None:
                return self.end_n  # finished meanwhile (and maybe removed): nothing to read
            if self.owner and not (self.folder / META).exists():
                self._restore()
            end = end_of(self.folder, status)
            self._replaying = True
        for worker in self.workers.values():
            worker.batches.final = True
            worker.wake()
        return end

    def finish(self, end_n: int, timeout: float | None) -> dict[str, Any]:
        """Deliver up to the end within ``timeout``, then apply the completion rule: remove
        the journal when nothing is outstanding. Returns :meth:`report`. Done once: a second
        call (another thread asking at the same time) waits for the first and gets its report."""
        with self._finishing:
            if self.finished is None:
                self.finished = self._finish(end_n, timeout)
            return self.finished

    def _finish(self, end_n: int, timeout: float | None) -> dict[str, Any]:
        self.end_n = end_n
        # A primary's worker may wait for the job's other writers before it closes the run
        # (see .writers): for most of the time left, keeping some for the close itself; not at
        # all in a replay (its writer is gone, and a sync must not wait on other nodes).
        now = time.monotonic()
        left = 0.0 if self._replaying or timeout is None else timeout
        for worker in self.workers.values():
            worker.verdict.close_by(now + max(0.0, left - min(CLOSE_RESERVE, left / 4)))
        self.drain(end_n, timeout, wait_for_open=False)
        self._stop_workers()
        joined = time.monotonic() + 0.3  # a worker inside a slow tracker call is left to it
        for worker in self.workers.values():
            worker.join(max(0.0, joined - time.monotonic()))
            worker.slot.release()
        # Reported once no worker takes a batch any more and the calls in flight have returned
        # (acknowledged): the summary then counts what a sync finds left, to the value.
        self.acks.save()
        report = self.report()
        if self.folder is not None:
            if not report["outstanding"] and self.owner:
                retire(self.folder)
            self._let_go()
        return report

    def forget(self) -> None:
        """In a child forked from the process that runs this follower: let go of the inherited
        lock descriptor (the parent keeps the lock) without touching anything."""
        self._let_go()

    def stop(self) -> None:
        """Stop delivering at once (what is not done stays in the journal)."""
        self._stop_workers()
        self.acks.save()
        self._let_go()

    def _stop_workers(self) -> None:
        self._stop.set()
        for worker in self.workers.values():
            worker.stop()

    def _let_go(self) -> None:
        with self._guard:
            if self._lock_fd is not None:
                close_quietly(self._lock_fd)
                self._lock_fd = None

    # -- a folder deleted under the run (a cleaner, ``rm -rf`` of old runs) ----------------------
    def _relock(self) -> None:
        """The journal's folder was deleted and made again (by its writer, or :meth:`_restore`):
        hold the new ``follower.lock`` as the old one was held, under the same descriptor, so
        that a ``tracking-core sync`` started now still steps aside."""
        with self._guard:
            held_fd = self._lock_fd
            if self.folder is None or held_fd is None or not self.owner:
                return
            try:
                if os.fstat(held_fd).st_nlink or not (self.folder / META).exists():
                    return
                fd = try_lock(self.folder / FOLLOWER_LOCK)
            except OSError:
                return
            if fd is not None:
                os.dup2(fd, held_fd)  # the old lock was on a file nobody can open any more
                os.close(fd)

    def _restore(self) -> None:
        """The folder was deleted and its writer is gone without making it again: make it
        again from what this follower still holds, ``meta.json`` as read at the start and each
        reader's open segment, copied into segments numbered after it (the readers read their
        own copy to its end, then these, skipping the numbers they have seen), so that the
        run's end can be journaled and ``tracking-core sync`` finds what is left."""
        assert self.folder is not None
        if self._meta is None:
            return
        # While the folder is gone no reader moves on (there is no next segment), so their
        # descriptors stay open until these copies of them are taken.
        held: dict[int, int] = {}
        for worker in self.workers.values():
            reader = worker.stream.reader
            spot = reader.held() if reader is not None else None
            if spot is not None and spot[0] not in held:
                held[spot[0]] = os.dup(spot[1])
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            replace_text(self.folder / META, self._meta)
            for index, (_old, fd) in enumerate(sorted(held.items()), max(held, default=-1) + 1):
                copy_segment(fd, self.folder / segment_name(index))
        except OSError as exc:
            log.warning("tracking-core could not make the deleted journal %s again (%s)", self.folder, exc)
            return
        finally:
            for fd in held.values():
                os.close(fd)
        self._relock()
        log.warning(
            "tracking-core's journal %s was deleted (a cleaner or an `rm -rf` of the tracking "
            "directory?) and its writer ended before making it again; it was made again from "
            "what delivery still held (%d segment(s)); records journaled after those are lost",
            self.folder,
            len(held),
        )

    # -- state --------------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """Plain data for the summary: each backend's counters and what is outstanding."""
        backends = {name: w.report() for name, w in self.workers.items()}
        progress = self.progress()
        missing = progress.outstanding(self.end_n)
        for name, why in self.left_out.items():
            backends[name] = progress.of(name).report(left_out=why)
            if name in missing:
                missing[name] += f" ({why})"
        owing: dict[str, dict[str, Any]] = {}
        for worker in self.workers.values():  # each registry's verdict; the first names a writer
            for label, entry in worker.verdict.owing.items():
                owing.setdefault(label, {**entry, "backends": []})["backends"].append(worker.name)
        return {
            "backends": backends,
            "writers": owing,
            "job": {name: w.registration.registry for name, w in self.workers.items() if w.registration.registry},
            "outstanding": missing,
            "end_n": self.end_n,
            "bad_lines": max((w.stream.bad.count for w in self.workers.values()), default=0),
            "lost": max((w.stream.lost for w in self.workers.values()), default=0),
            "journal": str(self.folder) if self.folder is not None else None,
        }

    def _housekeeping(self) -> None:
        reported = 0
        while not self._stop.wait(HOUSEKEEPING):
            try:
                self._relock()
                self.acks.save()
                self._collect()
                bad = max((w.stream.bad for w in self.workers.values()), key=lambda b: b.count, default=None)
                if bad is not None and bad.count > reported:
                    log.warning(
                        "journal %s: %d line(s) that are not records were skipped (%s)",
                        self.folder,
                        bad.count - reported,
                        "; ".join(bad.examples),
                    )
                    reported = bad.count
            except Exception:  # noqa: BLE001 - housekeeping must not end delivery
                log.exception("tracking-core's follower hit an internal error")

    def _collect(self) -> None:
        """Delete the segments every backend is done with (not the newest: it is written), and
        the snapshots of artifacts every backend has."""
        if self.folder is None or not self.workers or not self.owner:
            return
        done_through = self.progress().done_through()
        snapshot.remove_done(self.folder, done_through)
        for folder in (self.folder, self.spill):
            found = segments(folder) if folder is not None else []
            for (_index, path), (_next_index, next_path) in zip(found, found[1:], strict=False):
                first = self._first_n.get(str(next_path))
                if first is None:
                    first = first_record(next_path)
                    if first is None:
                        break
                    self._first_n[str(next_path)] = first
                if first - 1 > done_through:
                    break
                try:
                    path.unlink()
                except OSError:
                    break

    def progress(self) -> Progress:
        """Every backend's progress through the journal, the left out ones included."""
        return Progress(self.acks.progress, self.names)


def spill_of(folder: Path | None) -> Path | None:
    """The spill journal that the journal's ``meta.json`` names (see
    :mod:`~tracking_core.delivery.intake`): where its writer put what the journal could not take."""
    if folder is None:
        return None
    try:
        spill = read_meta(folder).get("spill")
    except ValueError:
        return None
    return Path(spill) if isinstance(spill, str) and spill else None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None
