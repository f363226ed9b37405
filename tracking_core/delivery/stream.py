"""One backend worker's view of a writer's records: in record order, at its own pace.

A writer's records lie in up to three places, each holding a part of one numbered sequence:

* the journal's segments (normally everything);
* the **spill journal** (a second journal in ``$TMPDIR``, see
  :mod:`tracking_core.delivery.intake`): the records the journal could not take (a full disk, a
  removed tracking directory), from the write that failed until the journal takes them again;
* **memory**: records neither journal could take, handed over as ``("records", [...])``
  messages (the last resort: they are lost with the delivery process).

One pump numbers the records consecutively and writes each chunk before the next, so the next
record is wherever record ``last_n + 1`` is: the stream takes it from whichever place holds it.
No message says where the writer switched, so a delivery process started again after a crash,
and ``tracking-core sync``, find the same order from the files alone. A record number at or
below the last one taken is a repeat (a write that failed half-way and went elsewhere whole) and
is skipped. A number found nowhere while later ones exist (memory records lost with a delivery
process, a line cut by a crash) is waited for :data:`GAP_GRACE` seconds while the writer runs,
then skipped and counted in :attr:`Stream.lost`; once the writer is gone (``final``), at once.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from .journal import BadLines, SegmentReader

Message = tuple[str, Any]

#: How long a missing record number is waited for while its writer runs (seconds).
GAP_GRACE = 5.0
#: Records read ahead from one place at a time.
READ_AHEAD = 1000


class _Place:
    """One place records come from, read ahead into a queue."""

    def __init__(self, reader: SegmentReader | None) -> None:
        self.reader = reader
        self.ahead: deque[dict[str, Any]] = deque()

    def head(self, after: int, final: bool) -> dict[str, Any] | None:
        """The first record numbered above ``after`` that this place holds now."""
        ahead = self.ahead
        while True:
            while ahead and ahead[0]["n"] <= after:
                ahead.popleft()
            if ahead:
                return ahead[0]
            if self.reader is None:
                return None
            got = self.reader.read(READ_AHEAD, final=final)
            if not got:
                return None
            ahead.extend(got)


class Stream:
    """The records of the journal in ``folder`` and of its ``spill`` journal, and those handed
    over in memory, in number order from ``start + 1`` (the first record a worker may lack)."""

    def __init__(self, folder: Path | None, *, spill: Path | None = None, start: int = -1) -> None:
        self.readers = [SegmentReader(journal) for journal in (folder, spill) if journal is not None]
        self.reader = self.readers[0] if folder is not None else None
        self._memory = _Place(None)
        self._places = [_Place(r) for r in self.readers] + [self._memory]
        self.last_n = start
        #: record numbers found nowhere and skipped
        self.lost = 0
        self._begun = False
        self._gap_since: float | None = None
        self._lock = threading.Lock()

    @property
    def bad(self) -> BadLines:
        """The bad lines of its journals together."""
        out = BadLines()
        for reader in self.readers:
            out.count += reader.bad.count
            out.examples += reader.bad.examples[: 3 - len(out.examples)]
        return out

    def put(self, message: Message) -> None:
        """Records handed over in memory (``("records", [...])``); other messages of older
        writers (where they switched) are not needed and ignored."""
        kind, value = message
        if kind == "records":
            with self._lock:
                self._memory.ahead.extend(sorted(value, key=lambda o: o["n"]))

    def take(self, limit: int, final: bool = False) -> list[dict[str, Any]]:
        """Up to ``limit`` records after the last one taken; ``final``: the writer is gone, so
        an incomplete last line in a journal is bad, not unfinished, and a gap is not waited for."""
        out: list[dict[str, Any]] = []
        with self._lock:
            while len(out) < limit:
                place = self._holder(final)
                if place is None:
                    break
                ahead, n = place.ahead, self.last_n
                while ahead and len(out) < limit and ahead[0]["n"] == n + 1:
                    out.append(ahead.popleft())
                    n += 1
                self.last_n = n
                self._begun = True
        return out

    def _holder(self, final: bool) -> _Place | None:
        """The place holding the next record; past a gap once it is given up on."""
        want = self.last_n + 1
        lowest: _Place | None = None
        for place in self._places:
            head = place.head(self.last_n, final)
            if head is None:
                continue
            if head["n"] == want:
                self._gap_since = None
                return place
            if lowest is None or head["n"] < lowest.ahead[0]["n"]:
                lowest = place
        if lowest is None:
            return None
        if self._begun and not final and not self._waited():
            return None
        if self._begun:
            self.lost += lowest.ahead[0]["n"] - want
        # else: the first read of a journal whose earliest segments were delivered and deleted
        self._gap_since = None
        self.last_n = lowest.ahead[0]["n"] - 1
        return lowest

    def _waited(self) -> bool:
        now = time.monotonic()
        if self._gap_since is None:
            self._gap_since = now
        return now - self._gap_since >= GAP_GRACE


class Delivery(Protocol):
    """A writer's delivery, on threads of its process or in a process of its own
    (:mod:`tracking_core.delivery.modes`)."""

    pid: int | None

    def feed(self, message: Message) -> None: ...

    def wake(self) -> None: ...

    def drain(self, target_n: int, timeout: float | None) -> bool: ...

    def finish(self, end_n: int, timeout: float) -> dict[str, Any]: ...

    def report(self) -> dict[str, Any]: ...

    def forget(self) -> None: ...
