"""One backend worker's view of a journal: its records in journal order, at its own pace.

Records normally come from the journal's segments. While the writer cannot journal (a full disk,
an unusable tracking directory) it hands its records over in memory instead, announcing each
switch with the record number where it happens, so the two sources join without a gap or a
repeat:

* ``("memory", n)``: from record ``n`` on, records arrive as ``("records", [...])`` messages;
  whatever the journal holds from ``n`` on is a partial write of records also handed over;
* ``("disk", n)``: from record ``n`` on, read the journal again.

A record number at or below the last one taken is a repeat and is skipped.
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path
from typing import Any

from .journal import BadLines, SegmentReader

Message = tuple[str, Any]


class Stream:
    def __init__(self, folder: Path | None, on_disk: bool = True) -> None:
        self.reader = SegmentReader(folder) if folder is not None else None
        self.on_disk = on_disk and self.reader is not None
        self.last_n = -1
        self._messages: deque[Message] = deque()
        self._lock = threading.Lock()

    @property
    def bad(self) -> BadLines:
        return self.reader.bad if self.reader is not None else BadLines()

    def put(self, message: Message) -> None:
        with self._lock:
            self._messages.append(message)

    def take(self, limit: int, final: bool = False) -> list[dict[str, Any]]:
        """Up to about ``limit`` records after the last one taken; ``final``: the writer is
        gone, so an incomplete last line in the journal is bad, not unfinished."""
        out: list[dict[str, Any]] = []
        with self._lock:
            while len(out) < limit:
                if self.on_disk:
                    if not self._from_disk(out, limit, final):
                        break
                elif not self._from_memory(out):
                    break
        return out

    def _from_disk(self, out: list[dict[str, Any]], limit: int, final: bool) -> bool:
        head = self._messages[0] if self._messages else None
        switch = head[1] if head is not None and head[0] == "memory" else None
        if head is not None and switch is None:
            self._messages.popleft()  # records or a switch to disk while on disk: nothing new
            return True
        assert self.reader is not None
        got = self.reader.read(limit - len(out), final=final)
        for obj in got:
            n = obj["n"]
            if n <= self.last_n or (switch is not None and n >= switch):
                continue
            out.append(obj)
            self.last_n = n
        if got:
            return True
        if switch is None:
            return False
        self._messages.popleft()
        self.on_disk = False
        return True

    def _from_memory(self, out: list[dict[str, Any]]) -> bool:
        if not self._messages:
            return False
        kind, value = self._messages.popleft()
        if kind == "disk" and self.reader is not None:
            self.on_disk = True
        elif kind == "records":
            for obj in value:
                if obj["n"] > self.last_n:
                    out.append(obj)
                    self.last_n = obj["n"]
        return True
