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
from typing import Any

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

    def release(self) -> None:
        for _, _, fd in self.files:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.files = [(rel, size, None) for rel, size, _ in self.files]


def hold(path: str | os.PathLike[str], key: str | None, kind: str) -> Held:
    """Open what ``path`` names (raises ``OSError`` when it cannot be read at all)."""
    source = os.path.abspath(os.fspath(path))
    info = os.stat(source)
    name = key or os.path.basename(source.rstrip(os.sep)) or "artifact"
    held = Held(name, kind, source, stat.S_ISDIR(info.st_mode), time.time())
    if not held.is_dir:
        held.files.append((os.path.basename(source), info.st_size, os.open(source, os.O_RDONLY)))
        return held
    try:
        _walk(source, "", held)
    except BaseException:
        held.release()
        raise
    return held


def _walk(root: str, rel: str, held: Held) -> None:
    with os.scandir(os.path.join(root, rel) if rel else root) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            sub = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_dir(follow_symlinks=False):
                _walk(root, sub, held)
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

    def __init__(self, folder: Path | None, done: Callable[[dict[str, Any]], None]) -> None:
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
        """The run ends: artifacts not snapshotted yet are let go of (counted in ``abandoned``)."""
        self.closed.set()

    def _loop(self) -> None:
        while True:
            held = self._queue.get()
            if held is None:
                return
            try:
                if self.closed.is_set():
                    self.abandoned += 1
                    continue
                entry = self._snapshot(held)
                if self.closed.is_set():
                    self.abandoned += 1
                    continue
                self._done(entry)
            except Exception:  # noqa: BLE001 - the thread must go on
                log.exception("tracking-core could not snapshot the artifact %s", held.source)
            finally:
                held.release()
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    def _snapshot(self, held: Held) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "t": "artifact",
            "ts": held.ts,
            "k": held.key,
            "kind": held.kind,
            "src": held.source,
            "dir": held.is_dir,
            "size": sum(size for _, size, _ in held.files),
            "files": [[rel, size] for rel, size, _ in held.files],
            "path": held.source,
            "snap": False,
        }
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
        entry["path"], entry["snap"] = str(top), True
        return entry


def _place(fd: int | None, source: str, target: Path, closed: threading.Event) -> None:
    """A hard link to the held file at ``target`` when its name still leads to it (checked
    after linking: the name may have been replaced meanwhile), else a copy of its bytes from
    the held descriptor (from ``source`` for a file that was not held)."""
    if fd is None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
        return
    held = os.fstat(fd)
    try:
        os.link(source, target)
    except OSError:
        pass
    else:
        linked = os.stat(target)
        if (linked.st_ino, linked.st_dev) == (held.st_ino, held.st_dev):
            return
        os.unlink(target)  # the name leads to another file now: copy the one that was logged
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


def number(entry: dict[str, Any], n: int) -> None:
    """Name the snapshot of an artifact entry by its record number (``artifacts/n<n>``), so
    that it can be deleted once every backend is done with that record."""
    if not entry.get("snap"):
        return
    top = Path(entry["path"])
    base = top.parent
    numbered = base.with_name(f"n{n:010d}")
    try:
        os.rename(base, numbered)
    except OSError:
        return  # it keeps its first name: removed with the journal
    entry["path"] = str(numbered / top.name)


def remove_done(folder: Path, done_through: int) -> None:
    """Delete the snapshots of the artifact records every backend has done."""
    try:
        names = os.listdir(folder / ARTIFACTS_DIR)
    except OSError:
        return
    for name in names:
        if name.startswith("n") and name[1:].isdigit() and int(name[1:]) <= done_through:
            shutil.rmtree(folder / ARTIFACTS_DIR / name, ignore_errors=True)
