"""The journal: what one writing process logged, in order, and what each backend has done with it.

One folder per writing process, ``<tracking_dir>/journal/<run_id>/<label>/``:

``meta.json``
    who wrote it: the run handle (each backend's target included), role, metric prefix, backends,
    replay options, pid and host. Written once, before the first record.
``seg-000000.jsonl``, ``seg-000001.jsonl``, ...
    the records, one JSON object per line, ``n`` first and consecutive across segments:
    ``{"n": 7, "t": "row", "ts": time, "m": {key: value}, "st": step, "sk": step_key}`` (one
    logged call), ``{"n": 8, "t": "config", "section": {...}}`` (converted and redacted: the
    journal holds no secret), and last ``{"n": 9, "t": "end", "status": "FINISHED"}``, the close.
    A segment is closed at :func:`~tracking_core.settings.segment_bytes` and a new one begun.
``acks.json``
    per backend, how far it is: every record up to ``n`` is done (delivered, or rejected by the
    tracker and reported), ``owed`` lists config records it refused that are still to deliver,
    with value counts for the summary. Written only by the journal's follower.
``writer.lock`` / ``follower.lock``
    ``flock``\\ ed by the writing process for its life, and by the one process that delivers the
    journal (its delivery process, its own thread, or ``tracking-core sync``).

Acknowledgements are exact because ``n`` is assigned in the order records are appended, by one
thread: "done up to n" never covers a record that was not handed over. What "done" means, and
the one completion rule that decides when a journal folder is removed, are in
:mod:`~tracking_core.delivery.progress`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..files import close_quietly, replace_text
from .entries import End, is_end
from .progress import BackendProgress

log = logging.getLogger("tracking_core.journal")

JOURNAL_DIR = "journal"
META = "meta.json"
ACKS = "acks.json"
WRITER_LOCK = "writer.lock"
FOLLOWER_LOCK = "follower.lock"
SEGMENT_PREFIX = "seg-"
SEGMENT_SUFFIX = ".jsonl"
FORMAT = 2
#: How a record line begins (``n`` is always its first key): used to find a whole record after
#: bytes that are not one (a cut line followed by the next record).
LINE_START = b'{"n":'
READ_CHUNK = 1 << 20


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), default=str)


def segment_name(index: int) -> str:
    return f"{SEGMENT_PREFIX}{index:06d}{SEGMENT_SUFFIX}"


def segments(folder: Path) -> list[tuple[int, Path]]:
    """The folder's segments in order."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    out = []
    for name in names:
        if name.startswith(SEGMENT_PREFIX) and name.endswith(SEGMENT_SUFFIX):
            with contextlib.suppress(ValueError):
                out.append((int(name[len(SEGMENT_PREFIX) : -len(SEGMENT_SUFFIX)]), folder / name))
    return sorted(out)


def _open_append(path: Path) -> int:
    """A segment opened for appending, created if needed (readable too: a segment deleted
    under its writer is copied from its descriptor)."""
    return os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)


# -- locks -------------------------------------------------------------------------------------
def try_lock(path: Path) -> int | None:
    """An exclusive ``flock`` on ``path`` (created if needed): the descriptor holding it (close
    it to let go), or None while another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def held(path: Path) -> bool:
    """Whether a live process holds the lock file ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


# -- writing (the training process) ------------------------------------------------------------
class JournalUnavailable(OSError):
    """The journal folder cannot be created or written."""


class JournalWriter:
    """Appends encoded record lines to the current segment, one ``os.write`` per batch.

    Called by one thread at a time (the run's pump). A write that fails (a full disk, an I/O
    error) raises ``OSError`` and leaves no cut line behind: the partial bytes are truncated
    away, or, where even that fails, the next write starts on a new line so that only the cut
    line is bad (and :class:`SegmentReader` finds the records after it).

    A folder deleted under the run (a cleaner) is noticed after the write that met it (the
    segment has no name left) and made again, with one warning: see :meth:`_recreate`.
    """

    def __init__(
        self,
        folder: Path,
        meta: Mapping[str, Any],
        segment_bytes: int,
        on_recreated: Callable[[], None] | None = None,
    ) -> None:
        self.folder = folder
        self.segment_bytes = segment_bytes
        self._meta = json.dumps({"format": FORMAT, **meta}, default=str, indent=1)
        self._on_recreated = on_recreated
        #: How many times the folder was found deleted under the run and made again.
        self.recreated = 0
        self._vanished = False
        self._sealed = False
        self._cut = False
        self.closed = False
        self.index = self.size = 0
        try:
            self._lock_fd, self._fd = self._make_folder(0, "in use by")
        except OSError as exc:
            raise JournalUnavailable(exc.errno, exc.strerror or str(exc), str(folder)) from exc

    def _make_folder(self, index: int, taken: str) -> tuple[int, int]:
        """Make the folder (its ``meta.json``, the writer's lock) and open segment ``index`` in
        it: the lock's and the segment's descriptors."""
        folder = self.folder
        folder.mkdir(parents=True, exist_ok=True)
        lock = try_lock(folder / WRITER_LOCK)
        if lock is None:
            raise JournalUnavailable(errno.EBUSY, f"journal folder {taken} another process", str(folder))
        try:
            replace_text(folder / META, self._meta)
            return lock, _open_append(folder / segment_name(index))
        except OSError:
            os.close(lock)
            raise

    def append(self, data: bytes) -> None:
        """Append whole lines (``OSError`` and nothing half-written if the disk refused them),
        beginning a new segment whenever one is full, so that a burst never makes one segment
        larger than about ``segment_bytes`` (finished segments can then be deleted)."""
        while data:
            room = self.segment_bytes - self.size
            if len(data) <= room:
                self._append(data)
                return
            cut = data.rfind(b"\n", 0, room) + 1
            if cut <= 0 and self.size == 0:
                cut = data.find(b"\n") + 1 or len(data)  # one line longer than a segment
            if cut > 0:
                self._append(data[:cut])
                data = data[cut:]
            if data and not self._rotate():
                self._append(data)  # no new segment to be had: this one grows
                return

    def _rotate(self) -> bool:
        if self.size == 0:
            return True
        try:
            fd = _open_append(self.folder / segment_name(self.index + 1))
        except OSError:
            return False
        os.close(self._fd)
        self._fd, self.index, self.size = fd, self.index + 1, 0
        return True

    def _append(self, data: bytes) -> None:
        if self.closed:
            raise JournalUnavailable(errno.EBADF, "journal closed", str(self.folder))
        if self._vanished:
            self._recreate()  # OSError while it cannot be made: the records go elsewhere
        if self._cut:
            data = b"\n" + data
        written = 0
        try:
            view = memoryview(data)
            while written < len(data):
                n = os.write(self._fd, view[written:])
                if n <= 0:
                    raise OSError(errno.ENOSPC, "short write")
                written += n
        except OSError:
            if written:
                try:
                    os.ftruncate(self._fd, self.size)
                except OSError:
                    self._cut = True
                else:
                    self._cut = False
            raise
        self.size += len(data)
        self._cut = False
        self._check_deleted()
        if self.size >= self.segment_bytes:
            self._rotate()  # where that fails, this one grows; the next write tries again

    # -- a folder deleted under the run (a cleaner, ``rm -rf`` of old runs) ----------------------
    def _check_deleted(self) -> None:
        """After each write (one ``fstat``): a segment with no name left was deleted with its
        folder, and what was just written went with it unless the folder is made again now."""
        if self._sealed:
            return
        try:
            gone = os.fstat(self._fd).st_nlink == 0
        except OSError:
            return
        if gone:
            self._vanished = True
            self._recreate()

    def _recreate(self) -> None:
        """Make the folder again (its ``meta.json``, the writer's lock) and continue in a new
        segment numbered after the lost one, which starts with a copy of the lost one's
        records: whoever had not read them yet finds them there, and a reader that had skips
        the numbers it has seen. ``OSError`` when the folder cannot be made (the caller then
        treats the records as not journaled)."""
        lock, fd = self._make_folder(self.index + 1, "made again by")
        try:
            copied = _copy_fd(self._fd, fd, self.size)
        except OSError:
            os.close(fd)
            os.close(lock)
            raise
        for old in (self._fd, self._lock_fd):
            close_quietly(old)
        self._fd, self._lock_fd, self.index, self.size = fd, lock, self.index + 1, copied
        self._vanished = False
        self.recreated += 1
        if self.recreated == 1:
            log.warning(
                "tracking-core's journal %s was deleted while the run went on (a cleaner or an "
                "`rm -rf` of the tracking directory?); it was made again, and delivery goes on "
                "from it without a gap; keep the tracking directory of a running job out of "
                "reach of cleaners (or point $TRACKING_CORE_DIR / --tracking-dir elsewhere)",
                self.folder,
            )
        if self._on_recreated is not None:
            try:
                self._on_recreated()
            except Exception:  # noqa: BLE001 - the run handle and configs are a convenience here
                log.debug("tracking-core could not save the run's files again", exc_info=True)

    def seal(self) -> None:
        """The run's end is journaled: from now on the folder goes when delivery is complete
        (the completion rule), so a folder found gone is no longer made again."""
        self._sealed = True

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for fd in (self._fd, self._lock_fd):
            close_quietly(fd)


def _copy_fd(source: int, dest: int, size: int) -> int:
    """Copy the first ``size`` bytes of ``source`` (read by offset) to the end of ``dest``;
    returns how many were copied (fewer when ``source`` is shorter)."""
    offset = 0
    while offset < size:
        chunk = os.pread(source, min(READ_CHUNK, size - offset), offset)
        if not chunk:
            break
        view = memoryview(chunk)
        while view:
            n = os.write(dest, view)
            if n <= 0:
                raise OSError(errno.ENOSPC, "short write")
            view = view[n:]
        offset += len(chunk)
    return offset


def copy_segment(source: int, path: Path) -> None:
    """A new segment file ``path`` holding everything in the open segment ``source``."""
    fd = _open_append(path)
    try:
        _copy_fd(source, fd, os.fstat(source).st_size)
    finally:
        os.close(fd)


# -- reading (the follower, sync) --------------------------------------------------------------
@dataclass
class BadLines:
    """Lines that were not a record (cut by a crash or a full disk, or garbage), counted."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, where: str, line: bytes) -> None:
        self.count += 1
        if len(self.examples) < 3:
            self.examples.append(f"{where}: {line[:60]!r}")


def parse_line(line: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("n"), int) and isinstance(obj.get("t"), str):
        return obj
    return None


def _records_in(line: bytes) -> tuple[dict[str, Any] | None, bool]:
    """The record in ``line`` and whether anything in it was not part of one. A record can hide
    behind bytes that are not one (a cut line that the next append continued)."""
    start = 0
    while start != -1:
        obj = parse_line(line[start:])
        if obj is not None:
            return obj, start > 0
        start = line.find(LINE_START, start + 1)
    return None, True


class SegmentReader:
    """Reads a journal's records in order, following the segments as they are written.

    An incomplete last line is left for the next read while the writer may still finish it;
    with ``final`` (the writer is gone) or once a newer segment exists, it is counted as bad.
    Segments deleted under the reader (fully acknowledged) are skipped.

    The current segment is held open, so a folder deleted under the run (a cleaner) is still
    read to its end; the writer goes on in a segment numbered after it, which the reader takes
    next once the folder is made again (the records it repeats are skipped by number). What
    :meth:`held` returns lets the follower make the folder again itself when the writer is gone.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.index = 0
        self.offset = 0
        self.bad = BadLines()
        self._buffer = b""
        self._fd: int | None = None  # the segment ``index``, while it is open

    def held(self) -> tuple[int, int] | None:
        """The current segment's number and open descriptor (None when none is open)."""
        return None if self._fd is None else (self.index, self._fd)

    def close(self) -> None:
        """Let go of the held segment (reading again opens it again)."""
        if self._fd is not None:
            close_quietly(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.close()  # the descriptor goes with the reader, whichever thread read last

    def _chunk(self) -> bytes:
        """The next bytes of the current segment (FileNotFoundError: it is not there)."""
        if self._fd is None:
            self._fd = os.open(self.folder / segment_name(self.index), os.O_RDONLY)
        return os.pread(self._fd, READ_CHUNK, self.offset)

    def read(self, limit: int, final: bool = False) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while len(out) < limit:
            path = self.folder / segment_name(self.index)
            try:
                data = self._chunk()
            except FileNotFoundError:
                if not self._next_segment():
                    break
                continue
            if data:
                self.offset += len(data)
                self._take(self._buffer + data, out, path.name)
                continue
            # the end of this segment, for now: the next one once there is one (or the writer is gone)
            if not (final or self._later()):
                break
            if self._buffer:
                self.bad.add(path.name, self._buffer)
                self._buffer = b""
            if not self._next_segment():
                break
        return out

    def _take(self, data: bytes, out: list[dict[str, Any]], where: str) -> None:
        lines = data.split(b"\n")
        self._buffer = lines.pop()  # b"" when data ended with a newline
        for line in lines:
            if not line:
                continue
            obj, dirty = _records_in(line)
            if dirty:
                self.bad.add(where, line)
            if obj is not None:
                out.append(obj)

    def _later(self) -> list[int]:
        """The numbers of the segments after the current one."""
        return [index for index, _ in segments(self.folder) if index > self.index]

    def _next_segment(self) -> bool:
        later = self._later()
        if not later:
            return False
        self.close()
        self.index, self.offset, self._buffer = min(later), 0, b""
        return True


# -- acknowledgements --------------------------------------------------------------------------
class Acks:
    """``acks.json``: every backend's :class:`BackendProgress`, saved atomically.

    Only the journal's follower writes it (under ``follower.lock``). A save that fails (a full
    disk) keeps the progress in memory and is tried again at the next save.
    """

    def __init__(self, folder: Path | None, backends: list[str]) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._saving = threading.Lock()  # saves in turn: an older snapshot never lands last
        self.progress = {name: BackendProgress() for name in backends}
        self._dirty = False
        self._warned = False
        if folder is not None:
            for name, data in read_acks(folder).items():
                if name in self.progress:
                    self.progress[name] = data

    def update(self, backend: str, **changes: Any) -> None:
        with self._lock:
            progress = self.progress[backend]
            for key, value in changes.items():
                setattr(progress, key, value)
            self._dirty = True

    def save(self) -> bool:
        folder = self.folder
        if folder is None:
            return True
        with self._saving:
            with self._lock:
                if not self._dirty:
                    return True
                text = json.dumps({k: asdict(v) for k, v in self.progress.items()})
                self._dirty = False
            try:
                replace_text(folder / ACKS, text)
            except OSError as exc:
                with self._lock:
                    self._dirty = True
                if not self._warned and folder.exists():
                    self._warned = True
                    log.warning(
                        "cannot save delivery progress in %s (%s); delivery goes on, and a restart "
                        "or `tracking-core sync` may resend what was delivered since",
                        folder,
                        exc,
                    )
                return False
        return True


def read_acks(folder: Path) -> dict[str, BackendProgress]:
    try:
        data = json.loads((folder / ACKS).read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for name, entry in dict(data).items():
        try:
            out[str(name)] = BackendProgress.from_mapping(entry)
        except (KeyError, TypeError, ValueError):
            continue
    return out


def read_meta(folder: Path) -> dict[str, Any]:
    """The journal's ``meta.json``; ValueError when it is missing or unreadable."""
    try:
        meta = json.loads((folder / META).read_text())
    except FileNotFoundError as exc:
        raise ValueError(f"{folder} is not a journal folder (no {META})") from exc
    except (OSError, ValueError) as exc:
        raise ValueError(f"{folder / META} is unreadable: {exc}") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(
            f"{folder / META} is not a journal of this tracking-core (format "
            f"{meta.get('format') if isinstance(meta, dict) else '?'}, expected {FORMAT})"
        )
    return meta


# -- a complete journal (see .progress for when it is) ----------------------------------------
def remove(folder: Path) -> None:
    """Delete a complete journal folder, and its run's folder and ``journal/`` if now empty."""
    shutil.rmtree(folder, ignore_errors=True)
    for parent in (folder.parent, folder.parent.parent):
        if parent.name and parent.exists():
            try:
                parent.rmdir()
            except OSError:
                break


def find_journals(root: Path) -> Iterator[Path]:
    """Journal folders under ``root`` (a tracking directory, a run's journal folder, or one)."""
    if (root / META).exists():
        yield root
        return
    base = root / JOURNAL_DIR if (root / JOURNAL_DIR).is_dir() else root
    found = []
    # os.walk, not rglob: a folder that goes while it is walked (a snapshot renamed, a journal
    # removed by its writer's finish) is skipped rather than raised; and nothing inside a journal
    # folder (its segments, its artifacts' snapshots) is walked.
    for folder, subfolders, files in os.walk(base):
        if META in files:
            found.append(Path(folder))
            subfolders[:] = []
    yield from sorted(found)


def scan(folder: Path) -> tuple[int, int | None, BadLines]:
    """The last record number of a journal nobody writes any more, its end's number (None
    when the writer died before journaling its end) and the bad lines met on the way."""
    reader = SegmentReader(folder)
    last, end = -1, None
    while True:
        got = reader.read(10_000, final=True)
        if not got:
            break
        for obj in got:
            last = max(last, obj["n"])
            if is_end(obj):
                end = obj["n"]
    reader.close()
    return last, end, reader.bad


def append_end(folder: Path, n: int, status: str) -> None:
    """Journal the end of a run whose writer died without it (under ``follower.lock``)."""
    found = segments(folder)
    path = found[-1][1] if found else folder / segment_name(0)

    line = dumps(End(n, status, time.time(), by="follower").encode())
    fd = _open_append(path)
    try:
        size = os.fstat(fd).st_size
        lead = b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""  # after a cut line
        os.write(fd, lead + line.encode() + b"\n")
    finally:
        os.close(fd)


def _first_number(lines: Iterable[bytes]) -> int | None:
    """The number of the first whole record among ``lines``."""
    for line in lines:
        obj, _ = _records_in(line)
        if obj is not None:
            return int(obj["n"])
    return None


def first_record(path: Path) -> int | None:
    """The number of a segment's first record (None if it has none yet)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(READ_CHUNK)
    except OSError:
        return None
    return _first_number(head.split(b"\n")[:-1])


def last_record(folder: Path) -> int:
    """The number of the last whole record journaled so far (-1 if none), read from the tail."""
    for _, path in reversed(segments(folder)):
        try:
            with open(path, "rb") as fh:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - READ_CHUNK))
                tail = fh.read()
        except OSError:
            continue
        n = _first_number(reversed(tail.split(b"\n")[:-1]))
        if n is not None:
            return n
    return -1
