"""What one backend's worker delivers next, read from its :class:`~.stream.Stream`.

Records not done yet, in order, in batches of one kind (see :mod:`.kinds`): consecutive metric
rows up to ``max_batch`` values (a backend whose every call costs much waits ``batch_interval``
for more, unless a drain runs or something else is queued), any other record alone. Config
records an earlier delivery set aside (*owed*) are offered again when the stream reaches them,
and a drain waits for that retry.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from . import kinds
from .entries import Entry, decode
from .progress import BackendProgress
from .stream import Stream
from .writers import Counts

#: The most metric values of one batch, unless the backend says otherwise.
MAX_BATCH = 1000
#: How many records are read from the stream at a time.
READ_AHEAD = 512


class Batches:
    """``lock`` guards what a drain reads (``urgent``, the owed records) and is the worker's."""

    def __init__(
        self,
        stream: Stream,
        progress: Callable[[], BackendProgress],
        lock: threading.Condition,
        max_batch: int | None = None,
        batch_interval: float | None = None,
    ) -> None:
        self.stream = stream
        self.progress = progress
        self.lock = lock
        self.max_batch = max_batch or MAX_BATCH
        self.batch_interval = batch_interval or 0.0
        self.pending: deque[Entry] = deque()
        self.owed_unseen: set[int] = set(progress().owed)  # not read yet
        self.owed_retrying: set[int] = set()  # read and offered again
        self.urgent = 0  # drains running: rows are not held back
        self.final = False  # the writer is gone: the stream skips a gap at once
        self.last_delivery = 0.0
        self.done_ts = 0.0  # the log time of the newest record done

    def retrying_owed(self) -> bool:
        """Whether a config owed from an earlier delivery is still to be offered again."""
        return bool(self.owed_unseen or self.owed_retrying)

    def fill(self) -> None:
        if self.pending:
            return
        progress = self.progress()
        taken = self.stream.take(READ_AHEAD, final=self.final)
        for line in taken:
            n = line["n"]
            if not progress.done(n):
                self.pending.append(decode(line))
            if self.owed_unseen:
                with self.lock:
                    if n in self.owed_unseen:
                        self.owed_retrying.add(n)
                    # An owed record the stream went past without finding (a damaged line)
                    # will not come: nothing to wait for.
                    self.owed_unseen = {x for x in self.owed_unseen if x > n}
        if not taken and self.final and self.owed_unseen:
            with self.lock:
                self.owed_unseen.clear()

    def next(self, urgent: bool = False) -> list[Entry]:
        """The next batch (empty: nothing to deliver now); ``urgent``: no holding back."""
        if urgent:
            with self.lock:
                self.urgent += 1
        try:
            return self._next()
        finally:
            if urgent:
                with self.lock:
                    self.urgent -= 1

    def _next(self) -> list[Entry]:
        self.fill()
        pending = self.pending
        if not pending:
            return []
        kind = kinds.of(pending[0])
        if not kind.batched:
            return [pending.popleft()]
        if self._hold_back():
            return []
        batch: list[Entry] = []
        values = 0
        while pending and type(pending[0]) is kind.entry and values < self.max_batch:
            entry = pending.popleft()
            batch.append(entry)
            values += kind.values(entry)
            if not pending:
                self.fill()
        return batch

    def _hold_back(self) -> bool:
        if not self.batch_interval or self.urgent:
            return False
        if time.monotonic() - self.last_delivery >= self.batch_interval:
            return False
        if any(not kinds.of(e).batched for e in self.pending):
            return False
        return kinds.count(self.pending) < self.max_batch

    def put_back(self, batch: list[Entry]) -> None:
        self.pending.extendleft(reversed(batch))

    def done(self, batch: list[Entry]) -> None:
        with self.lock:
            self.owed_retrying -= {e.n for e in batch}
        stamp = getattr(batch[-1], "timestamp", None)
        if isinstance(stamp, (int, float)):
            self.done_ts = max(self.done_ts, float(stamp))
        self.last_delivery = time.monotonic()

    def counts(self, idle: bool, poll: float) -> Counts:
        """How far this backend is with the writer's values: what was read and not delivered
        yet counts as journaled. ``idle``: nothing more to read just now, so everything logged
        one ``poll`` ago (the writer's pump) is delivered."""
        p = self.progress()
        through = self.done_ts
        if self.pending:
            first = getattr(self.pending[0], "timestamp", None)
            if isinstance(first, (int, float)):
                through = max(through, float(first) - 0.001)
        elif idle:
            through = max(through, time.time() - poll)
        return Counts(p.delivered + p.rejected + kinds.count(self.pending), p.delivered, p.rejected, through)
