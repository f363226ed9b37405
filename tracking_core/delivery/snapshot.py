"""Artifacts as they were when logged: held open on the training thread, snapshotted off it.

``log_artifact(path)`` must return in about a millisecond whatever the file's size, and the file
delivered must be the one logged even if the job deletes or replaces it right after (checkpoint
rotation). So:

* on the **training thread**, :func:`hold` opens the file (or every file of a directory, up to
  :data:`MAX_HELD` of them): an open descriptor keeps the logged file's bytes alive whatever
  happens to its name afterwards (``os.replace`` over it, ``os.remove``);
* on the **snapshot thread**, :class:`Snapshotter` makes a hard link to each held file inside the
  journal folder (``artifacts/<id>/``) — instant, no bytes copied — or, where that is not possible
  (another file system, a file already deleted), copies the bytes from the descriptor; then the
  artifact goes to the pump to be journaled like any record, pointing at its snapshot. The
  snapshot goes with the journal (or when every backend has the artifact).

**Never a journal.** A directory that holds the tracking directory (``log_artifact(".")`` from
the job's working directory, say) would carry the live journal into the artifact: its copy would
be replayed by ``tracking-core sync`` as a second writer, every value twice. So :func:`hold`
leaves out the tracking directory, any journal folder found anywhere inside the directory
(``meta.json`` beside a lock, acks or a segment), and everything when the path logged lies in the
tracking directory's journals; what was left out is listed in :attr:`Held.left_out` (the run says
it in one warning) and the rest of the directory is delivered.

Not protected: a file *rewritten in place* (opened for writing and changed rather than replaced)
before its snapshot is complete — a hard link shares its bytes, a copy reads them as they are
then; the files of a directory beyond :data:`MAX_HELD`, which are copied by name. Where no
snapshot can be taken at all (no usable tracking directory, a full disk), the artifact is
delivered from its original path, with one warning.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..files import close_quietly
from .entries import Artifact
from .journal import ACKS, FOLLOWER_LOCK, JOURNAL_DIR, META, SEGMENT_PREFIX, WRITER_LOCK

log = logging.getLogger("tracking_core.delivery")

#: Files of one directory held open on the training thread (the rest are copied by name).
MAX_HELD = 256
ARTIFACTS_DIR = "artifacts"


@dataclass
class Held:
    """An artifact held open: ``files`` are ``(relative path, size, fd or None)``."""

    key: str
    kind: str
    source: str
    is_dir: bool
    ts: float
    files: list[tuple[str, int, int | None]] = field(default_factory=list)
    #: Folders left out (relative paths; ``.`` for the whole path): the tracking directory and
    #: journal folders, never snapshotted.
    left_out: list[str] = field(default_factory=list)

    def release(self) -> None:
        for _, _, fd in self.files:
            if fd is not None:
                close_quietly(fd)
        self.files = [(rel, size, None) for rel, size, _ in self.files]


def hold(
    path: str | os.PathLike[str], key: str | None, kind: str, tracking_dir: str | os.PathLike[str] | None = None
) -> Held:
    """Open what ``path`` names (raises ``OSError`` when it cannot be read at all), leaving out
    ``tracking_dir`` and every journal folder (see the module doc)."""
    source = os.path.abspath(os.fspath(path))
    info = os.stat(source)
    name = key or os.path.basename(source.rstrip(os.sep)) or "artifact"
    held = Held(name, kind, source, stat.S_ISDIR(info.st_mode), time.time())
    fence = _Fence.of(tracking_dir)
    if fence.inside_journals(source) or (held.is_dir and fence.is_tracking_dir(info)):
        held.left_out.append(".")
        return held
    if not held.is_dir:
        held.files.append((os.path.basename(source), info.st_size, os.open(source, os.O_RDONLY)))
        return held
    try:
        _walk(source, "", held, fence)
    except BaseException:
        held.release()
        raise
    return held


@dataclass(frozen=True)
class _Fence:
    """The tracking directory (its device and inode, and where its journals are)."""

    ident: tuple[int, int] | None = None
    journals: str | None = None

    @classmethod
    def of(cls, tracking_dir: str | os.PathLike[str] | None) -> _Fence:
        if tracking_dir is None:
            return cls()
        try:
            info = os.stat(tracking_dir)
        except OSError:
            return cls()
        return cls((info.st_dev, info.st_ino), os.path.join(os.path.realpath(tracking_dir), JOURNAL_DIR))

    def is_tracking_dir(self, info: os.stat_result) -> bool:
        return self.ident == (info.st_dev, info.st_ino)

    def is_tracking_entry(self, entry: os.DirEntry[str]) -> bool:
        # The inode comes with the directory listing; a stat only where it matches.
        return self.ident is not None and entry.inode() == self.ident[1] and self.is_tracking_dir(entry.stat(follow_symlinks=False))

    def inside_journals(self, source: str) -> bool:
        if self.journals is None:
            return False
        real = os.path.realpath(source)
        return real == self.journals or real.startswith(self.journals + os.sep)


def is_journal_folder(names: set[str]) -> bool:
    """Whether a folder holding ``names`` is a journal folder (``meta.json`` beside a lock, the
    acks or a segment)."""
    if META not in names:
        return False
    return bool(names & {WRITER_LOCK, FOLLOWER_LOCK, ACKS}) or any(n.startswith(SEGMENT_PREFIX) for n in names)


def _walk(root: str, rel: str, held: Held, fence: _Fence) -> None:
    with os.scandir(os.path.join(root, rel) if rel else root) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    if is_journal_folder({e.name for e in entries}):
        held.left_out.append(rel or ".")
        return
    for entry in entries:
        sub = f"{rel}/{entry.name}" if rel else entry.name
        if entry.is_dir(follow_symlinks=False):
            if fence.is_tracking_entry(entry):
                held.left_out.append(sub)
            else:
                _walk(root, sub, held, fence)
        elif entry.is_file():
            fd = None
            if sum(1 for f in held.files if f[2] is not None) < MAX_HELD:
                try:
                    fd = os.open(entry.path, os.O_RDONLY)
                except OSError:
                    fd = None
            held.files.append((sub, entry.stat().st_size, fd))


class Snapshotter:
    """The snapshot thread: takes held artifacts in order, snapshots them into ``folder``
    (None: no snapshot possible) and hands each finished one to ``done`` as a journal entry
    without its record number."""

    def __init__(self, folder: Path | None, done: Callable[[Artifact], None]) -> None:
        self.folder = folder / ARTIFACTS_DIR if folder is not None else None
        self._done = done
        self._queue: queue.Queue[Held | None] = queue.Queue()
        self._count = 0
        self._warned = False
        self._idle = threading.Condition()
        self._busy = 0
        self._thread: threading.Thread | None = None
        self.closed = threading.Event()
        self.abandoned = 0

    def put(self, held: Held) -> None:
        with self._idle:
            self._busy += 1
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="tracking-core-snapshot", daemon=True)
            self._thread.start()
        self._queue.put(held)

    def wait(self, timeout: float) -> bool:
        """Until every artifact put so far is handed on (True) or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def close(self) -> None:
        """The run ends: artifacts not handed on yet are let go of, counted in ``abandoned`` now
        (the finish summary reads it right after; the thread lets go of them later)."""
        with self._idle:
            self.closed.set()
            self.abandoned = self._busy

    def _loop(self) -> None:
        while True:
            held = self._queue.get()
            if held is None:
                return
            try:
                if self.closed.is_set():
                    continue
                entry = self._snapshot(held)
                with self._idle:  # handed on, or counted by close(): never both
                    if self.closed.is_set():
                        continue
                    self._done(entry)
            except Exception:  # noqa: BLE001 - the thread must go on
                log.exception("tracking-core could not snapshot the artifact %s", held.source)
            finally:
                held.release()
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    def _snapshot(self, held: Held) -> Artifact:
        entry = Artifact(
            n=-1,  # numbered by the pump
            timestamp=held.ts,
            key=held.key,
            artifact_kind=held.kind,
            source=held.source,
            is_dir=held.is_dir,
            size=sum(size for _, size, _ in held.files),
            files=tuple((rel, size) for rel, size, _ in held.files),
            path=held.source,
            snapshot=False,
        )
        if self.folder is None:
            return entry
        self._count += 1
        base = self.folder / f"{os.getpid()}-{self._count:06d}"
        top = base / os.path.basename(held.source.rstrip(os.sep))
        try:
            if held.is_dir:
                top.mkdir(parents=True)
                for rel, _size, fd in held.files:
                    target = top / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    _place(fd, os.path.join(held.source, rel), target, self.closed)
            else:
                base.mkdir(parents=True)
                _place(held.files[0][2], held.source, top, self.closed)
        except InterruptedError:
            shutil.rmtree(base, ignore_errors=True)
            return entry
        except OSError as exc:
            shutil.rmtree(base, ignore_errors=True)
            if not self._warned:
                self._warned = True
                log.warning(
                    "tracking-core could not snapshot the artifact %s (%s); it (and any other "
                    "that cannot be snapshotted) is delivered from its path as it is then",
                    held.source,
                    exc,
                )
            return entry
        return entry._replace(path=str(top), snapshot=True)


def _place(fd: int | None, source: str, target: Path, closed: threading.Event) -> None:
    """A hard link to the held file at ``target`` when its name still leads to it (checked
    after linking: the name may have been replaced meanwhile), else a copy of its bytes from
    the held descriptor (from ``source`` for a file that was not held)."""
    held = None if fd is None else os.fstat(fd)
    try:
        os.link(source, target)
    except OSError:
        pass
    else:
        if held is None:
            return
        linked = os.stat(target)
        if (linked.st_ino, linked.st_dev) == (held.st_ino, held.st_dev):
            return
        os.unlink(target)  # the name leads to another file now: copy the one that was logged
    if fd is None:
        shutil.copyfile(source, target)
        return
    partial = target.with_name(target.name + ".partial")
    with open(partial, "wb") as out:
        offset = 0
        while True:
            if closed.is_set():
                raise InterruptedError("the run ended before the copy was complete")
            chunk = os.pread(fd, 1 << 20, offset)
            if not chunk:
                break
            out.write(chunk)
            offset += len(chunk)
    os.replace(partial, target)


def numbered(entry: Artifact, n: int) -> Artifact:
    """The artifact entry as record ``n``, its snapshot named by that number
    (``artifacts/n<n>``), so that it can be deleted once every backend is done with that record."""
    entry = entry._replace(n=n)
    if not entry.snapshot:
        return entry
    top = Path(entry.path)
    base = top.parent
    numbered = base.with_name(f"n{n:010d}")
    try:
        os.rename(base, numbered)
    except OSError:
        return entry  # it keeps its first name: removed with the journal
    return entry._replace(path=str(numbered / top.name))


def remove_done(folder: Path, done_through: int) -> None:
    """Delete the snapshots of the artifact records every backend has done."""
    try:
        names = os.listdir(folder / ARTIFACTS_DIR)
    except OSError:
        return
    for name in names:
        if name.startswith("n") and name[1:].isdigit() and int(name[1:]) <= done_through:
            shutil.rmtree(folder / ARTIFACTS_DIR / name, ignore_errors=True)
