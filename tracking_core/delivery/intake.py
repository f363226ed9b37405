"""The training process's side of delivery: the caller appends, the pump journals.

* The training thread only appends a tuple to a deque and compares the deque's length with its
  bound (no lock, no I/O, no conversion).
* The **pump** thread wakes every flush interval (at once for a config or the end), converts the
  values to float, numbers the records in the order it takes them -- the journal's own order, so
  an acknowledgement "done up to n" is exact whichever threads logged -- and journals them in
  **chunks** (at most :data:`CHUNK_ITEMS` items or about :data:`CHUNK_SECONDS` of work, one
  write each). A pass takes only what waited when it began, so it ends whatever other threads
  go on logging, and the journal holds every chunk as soon as it is converted.
* **Bounded memory.** At most :attr:`Intake.bound` items wait in the deque: the smaller of
  ``$TRACKING_CORE_QUEUE_RECORDS`` (one item is one log call) and what the pump journals in half a
  flush interval, measured as it goes (fewer for heavy items: tables, wide rows). A call that
  finds the deque past its bound journals chunks itself, on its own thread, until it is back
  within it (:meth:`Intake.relieve`): a logging loop faster than the pump is slowed to the
  pump's pace (backpressure), nothing is dropped, and the journal stays at most about one flush
  interval behind the training loop.
* **The end.** The end record is journaled after everything taken before it; whatever another
  thread logged after it (while ``finish`` ran) is ignored, counted and reported with the
  "after finish" warning, never written after the end.
* Tables, histograms and texts are converted here too (plain cells, bins, redaction: see
  :mod:`tracking_core.delivery.kinds`); artifacts come from the snapshot thread once their
  snapshot is taken (:mod:`tracking_core.delivery.snapshot`).
* **Where records go when the journal cannot take them** (a full disk, a removed or unusable
  tracking directory): to the **spill journal**, a journal of the same format in
  ``$TMPDIR`` (:func:`spill_folder`) that the journal's ``meta.json`` names, so that a delivery
  process, its successor after a crash and ``tracking-core sync`` all read it; back to the
  journal as soon as it takes records again. Only when the spill journal cannot be written
  either do records go to delivery in memory (the last resort: a delivery process that dies
  loses them). Every record lies in exactly one of those places under its own number, and
  delivery reads them in number order (:mod:`tracking_core.delivery.stream`). Each is counted.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import os
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .. import settings
from ..errors import WarnOnce
from ..records import ConfigSection
from . import kinds, snapshot
from .entries import Artifact, encode_value, row_line
from .journal import JOURNAL_DIR, JournalWriter, dumps
from .stream import Delivery

log = logging.getLogger("tracking_core.delivery")

#: An item of the intake, its kind first (:mod:`tracking_core.delivery.kinds`): (METRIC, ts,
#: metrics, step, step_key); (TABLE | HISTOGRAM | TEXT, ts, key, held value, step, step_key,
#: *what its conversion takes besides: a histogram's bins); (ARTIFACT, its entry once
#: snapshotted); (CONFIG, section); (END, status).
Item = tuple[Any, ...]

#: A chunk: at most this many items, or about this many seconds of conversion, per write.
CHUNK_ITEMS = 512
CHUNK_SECONDS = 0.005
#: The bound never falls below this many items (a run of tables is still journaled in chunks).
MIN_BOUND = 64
#: Of a flush interval, how much of the pump's own work may wait in the deque.
LAG_SHARE = 0.5
#: The pump's cost per item assumed before it has measured its own (seconds).
FIRST_COST = 20e-6
#: After the journal refused a write, records go elsewhere for this long before it is tried again.
RETRY_JOURNAL = 1.0


def spill_folder(run_folder: str, label: str) -> Path:
    """Where a writer's spill journal goes: ``$TMPDIR/tracking-core-spill-<uid>/journal/<run>/
    <label>``, laid out like a tracking directory (``tracking-core sync`` reads it as one)."""
    return Path(tempfile.gettempdir()) / f"tracking-core-spill-{os.getuid()}" / JOURNAL_DIR / run_folder / label


def to_float(value: Any) -> float | None:
    """A metric value as float (Python numbers, numpy and torch scalars), or None if it is not
    one (including an int too large for a float)."""
    try:
        if isinstance(value, (int, float)):
            return float(value)
        value = value.item()
        return float(value) if isinstance(value, (int, float)) else None
    except Exception:  # noqa: BLE001 - no item(), OverflowError, a non-scalar tensor, a raising item()
        return None


class Intake:
    """One writer's intake (see the module doc). ``spill`` opens the spill journal when the
    journal fails (None: there is none to fall back to); ``run_id`` names the run in warnings."""

    def __init__(
        self,
        writer: JournalWriter | None,
        prefix: str,
        flush_interval: float,
        where: str,
        *,
        run_id: str = "",
        spill: Callable[[], JournalWriter] | None = None,
    ) -> None:
        self.flush_interval = flush_interval
        self.run_id = run_id
        self.items: deque[Item] = deque()
        #: Items allowed to wait in the deque before a logging call journals them itself.
        self.max_items = settings.queue_records()
        self.bound = min(self.max_items, self._affordable(FIRST_COST))
        self._warn_once = WarnOnce(log)
        self.lines = Lines(prefix, self._warn_once)
        self.places = Places(writer, where, spill, self._warn_once)
        #: values logged after the end (ignored) / times a logging call journaled a chunk itself
        self.late = 0
        self.relieved = 0
        self._taken = 0
        self._cost = FIRST_COST
        self._end_n: int | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tracking-core-pump", daemon=True)
        self.snapshots = snapshot.Snapshotter(writer.folder if writer is not None else None, self._snapshotted)

    def start(self, delivery: Delivery | None) -> None:
        self.places.delivery = delivery
        self._thread.start()

    # -- what the finish summary counts (see tracking_core.summary) ----------------------------
    @property
    def logged(self) -> int:
        return self.lines.logged

    @property
    def skipped(self) -> Counter[str]:
        return self.lines.skipped

    @property
    def spilled(self) -> int:
        return self.places.spilled

    @property
    def not_journaled(self) -> int:
        return self.places.not_journaled

    @property
    def spill_folder(self) -> str | None:
        return self.places.spill_folder

    @property
    def abandoned(self) -> int:
        """Artifacts whose snapshot the run's end did not wait for (not delivered)."""
        return self.snapshots.abandoned

    # -- the caller's side ------------------------------------------------------------------
    def config(self, section: ConfigSection) -> None:
        self.items.append((kinds.CONFIG, section))
        self._wake.set()

    def artifact(self, held: snapshot.Held) -> None:
        self.snapshots.put(held)

    def _snapshotted(self, entry: Artifact) -> None:
        self.items.append((kinds.ARTIFACT, entry))
        self._wake.set()

    def relieve(self) -> None:
        """A logging call found the deque past :attr:`bound`: journal on the calling thread until
        it is back within it (waiting, at most, for the chunk the pump is writing)."""
        try:
            with self._lock:
                while len(self.items) > self.bound and self._chunk(CHUNK_ITEMS):
                    self.relieved += 1
        except Exception:  # noqa: BLE001 - never raise into the training loop
            log.exception("tracking-core's intake hit an internal error")

    def end(self, status: str, timeout: float = 0.0) -> int:
        """Journal the end (after the artifacts being snapshotted, for up to ``timeout``) after
        everything logged before it; returns its record number."""
        complete = self.snapshots.wait(timeout)
        self.snapshots.close()
        if not complete:
            log.warning(
                "tracking-core: the run ends while artifacts are still being copied for their "
                "snapshot; those are not delivered (give finish() a longer timeout)"
            )
        self.items.append((kinds.END, status))
        last = self.pump()
        return self._end_n if self._end_n is not None else last

    # -- the pump ---------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            try:
                self.pump()
            except Exception:  # noqa: BLE001 - never let the pump die
                log.exception("tracking-core's pump hit an internal error")

    def close(self) -> None:
        """The run is over: stop the pump, ignore (and count) what is still queued, and close
        the journals. Nothing is written after this, whoever still calls."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            self._closed = True
            while self.items:
                self._late(self.items.popleft())
            self.places.close()

    def forked(self) -> None:
        """In a child forked from this process: let go of the inherited journal descriptors
        (without the lock, which a thread of the parent may have held at the fork)."""
        self._closed = True
        self.places.close()

    def pump(self) -> int:
        """Journal what waits now, chunk by chunk (not what other threads log meanwhile);
        returns the number of the last record journaled."""
        with self._lock:
            target = self._taken + len(self.items)
        while True:
            with self._lock:
                if self._taken >= target or not self._chunk(target - self._taken):
                    break
        return self.lines.next_n - 1

    def _chunk(self, most: int) -> bool:
        """Take up to ``most`` items (at most a chunk's worth) and journal them in one write;
        False when there was nothing to take. Called under the lock."""
        items = self.items
        if not items:
            return False
        most = min(most, CHUNK_ITEMS)
        lines: list[dict[str, Any]] = []
        clock = time.perf_counter
        began = clock()
        taken = 0
        logged = self.lines.logged
        while items and taken < most:
            item = items.popleft()
            taken += 1
            if self._end_n is not None or self._closed:
                self._late(item)
                continue
            line = self.lines.line(item)
            if line is not None:
                lines.append(line)
                if item[0].closes:
                    self._end_n = line["n"]
            if clock() - began > CHUNK_SECONDS:
                break
        self._taken += taken
        if lines and not self._closed:
            self.places.write(lines, self.lines.logged - logged, self.lines.encoded)
        self._measured(clock() - began, taken)
        return True

    def _measured(self, seconds: float, taken: int) -> None:
        """Keep the bound at what the pump journals in a share of a flush interval."""
        if taken < 32:
            return  # too few to tell the cost per item from the cost of the write
        self._cost = 0.8 * self._cost + 0.2 * (seconds / taken)
        self.bound = min(self.max_items, self._affordable(self._cost))

    def _affordable(self, cost: float) -> int:
        return max(MIN_BOUND, int(self.flush_interval * LAG_SHARE / max(cost, 1e-9)))

    def _late(self, item: Item) -> None:
        """An item queued after the end (or the close): ignored, counted, said once."""
        kind: kinds.Kind = item[0]
        if kind.closes:
            return
        self.late += len(item[2]) if kind.batched and isinstance(item[2], Mapping) else 1
        self._warn_once(
            "late",
            "%s() after finish() of run %s: ignored (it came after the run's end; the finish "
            "summary counts such values)",
            kind.method,
            self.run_id,
        )


class Lines:
    """Items made journal lines, numbered in the order the pump takes them; what cannot be is
    skipped and counted (``skipped``, by key), ``logged`` counts what can."""

    def __init__(self, prefix: str, warn: WarnOnce) -> None:
        self.prefix = prefix
        self.warn = warn
        self.next_n = 0
        self.logged = 0
        self.skipped: Counter[str] = Counter()
        self.redact = kinds.redacts_text()
        self.encoded: dict[int, str] = {}  # record number -> its line, for those encoded to check them

    def line(self, item: Item) -> dict[str, Any] | None:
        """The journal line of an item, numbered (None: nothing to journal, the item was
        skipped and counted). Metric rows take their own path (per value); a kind with a
        conversion is converted and keyed; any other kind's entry is made as it is."""
        kind: kinds.Kind = item[0]
        if kind.batched:
            return self._row(*item[1:])
        if kind.convert is not None:
            return self._keyed(*item)
        try:
            return self._numbered(kind, kind.make(self.next_n, item[1]))
        except Exception as exc:  # noqa: BLE001 - one bad item never stops the others
            self.skipped[f"<{kind.tag}>"] += 1
            self.warn(f"item-{kind.tag}", "tracking-core could not journal a %s (%s: %s); it is skipped and counted in the finish summary", kind.name, type(exc).__name__, exc)
            return None

    def _numbered(self, kind: kinds.Kind, entry: Any) -> dict[str, Any]:
        """The journal line of ``entry`` (numbered ``next_n``), counted; encoded here, so that
        a line that cannot be fails here, not in the journal write."""
        obj: dict[str, Any] = entry.encode()
        self.encoded[self.next_n] = dumps(obj)
        self.logged += kind.values(entry)
        self.next_n += 1
        return obj

    def _row(self, ts: float, metrics: Mapping[Any, Any], step: Any, step_key: Any) -> dict[str, Any] | None:
        values: dict[str, float | str] = {}
        for key, raw in metrics.items():
            name = kinds.NAMES[key]  # the name as str, secret shapes replaced (cached)
            value = to_float(raw)
            if value is None:
                self.skipped[self.prefix + name] += 1
                self.warn(
                    f"value-{name}",
                    "metric %r: %r is not a number; its values are skipped and counted in the "
                    "finish summary",
                    self.prefix + name,
                    type(raw).__name__,
                )
                continue
            values[name] = encode_value(value)
        steps = self._steps(step, step_key)
        if not values:
            return None
        self.logged += len(values)
        obj = row_line(self.next_n, ts, values, *steps)
        self.next_n += 1
        return obj

    def _steps(self, step: Any, step_key: Any) -> tuple[int | None, str | None]:
        """The step as an int (None, said once, when it is not an integer) and its key as str."""
        key = None if step_key is None else str(step_key)
        if step is None:
            return None, key
        try:
            return operator.index(step), key
        except TypeError:
            pass
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            number = float(step)
            if number.is_integer():
                return int(number), key
        self.warn("step", "tracking-core: step %r is not an integer; logged without a step", step)
        return None, key

    def _keyed(self, kind: kinds.Kind, ts: float, key: Any, value: Any, step: Any, step_key: Any, *extra: Any) -> dict[str, Any] | None:
        """A table, histogram or text: its held value converted by its kind, under its key."""
        name = kinds.NAMES[key if isinstance(key, str) else str(key)]  # secret shapes replaced
        try:
            fields = kind.convert(value, self.redact, *extra)  # type: ignore[misc]
            return self._numbered(kind, kind.entry(self.next_n, ts, name, *fields, *self._steps(step, step_key)))
        except Exception as exc:  # noqa: BLE001 - bad input is reported, never raised
            self.skipped[self.prefix + name] += 1
            self.warn(
                f"{kind.tag}-{name}",
                "%s %r could not be logged (%s: %s); it is skipped and counted in the finish summary",
                kind.name,
                self.prefix + name,
                type(exc).__name__,
                exc,
            )
            return None


class Places:
    """Where journal lines go: the journal, else the spill journal, else delivery in memory
    (see the module doc); each change is said once (``warn``), each value counted where it went."""

    def __init__(
        self,
        writer: JournalWriter | None,
        where: str,
        spill: Callable[[], JournalWriter] | None,
        warn: WarnOnce,
    ) -> None:
        self.writer = writer
        self.where = where
        self.warn = warn
        self.delivery: Delivery | None = None
        #: values journaled in the spill journal / handed to delivery in memory only
        self.spilled = 0
        self.not_journaled = 0
        self.spill_folder: str | None = None
        self._spill_open = spill
        self._spill: JournalWriter | None = None
        self._spill_error: OSError | None = None
        self._place = "journal" if writer is not None else "memory"
        self._retry_at = 0.0  # after a failed write, the journal is tried again from then

    def close(self) -> None:
        for writer in (self.writer, self._spill):
            if writer is not None:
                writer.close()

    def write(self, lines: list[dict[str, Any]], values: int, encoded: dict[int, str]) -> None:
        """``values``: what the lines count for (:func:`kinds.count`); ``encoded``: the lines
        already encoded, by number (taken from it)."""
        data = "".join((encoded.pop(o["n"], None) or dumps(o)) + "\n" for o in lines).encode()
        failed: OSError | None = None
        if self.writer is not None and time.monotonic() >= self._retry_at:
            failed = _append(self.writer, data)
            if failed is None:
                self._now_in("journal")
                return
            self._retry_at = time.monotonic() + RETRY_JOURNAL
        spill = self._spill_writer()
        if spill is not None:
            spill_failed = _append(spill, data)
            if spill_failed is None:
                self.spilled += values
                self._now_in("spill", failed)
                return
            self._spill_error = spill_failed
        self.not_journaled += values
        self._now_in("memory", failed)
        if self.delivery is not None:
            self.delivery.feed(("records", lines))

    def _spill_writer(self) -> JournalWriter | None:
        if self._spill is None and self._spill_open is not None:
            opener, self._spill_open = self._spill_open, None  # tried once
            try:
                self._spill = opener()
            except OSError as exc:
                self._spill_error = exc
            else:
                self.spill_folder = str(self._spill.folder)
        return self._spill

    def _now_in(self, place: str, failed: OSError | None = None) -> None:
        """Records go to ``place`` now: each change said once (``failed``: why the journal
        did not take them)."""
        if place != self._place:
            self._place = place
            if place == "journal":
                self.warn("again", "tracking-core's journal %s takes records again", self.where)
            elif place == "spill":
                self.warn(
                    "spill",
                    "tracking-core cannot write its journal %s (%s): records are journaled in %s "
                    "instead until the disk takes them again (delivery and `tracking-core sync` "
                    "read them there); free space there, or point $%s / --tracking-dir elsewhere",
                    self.where,
                    failed,
                    self.spill_folder,
                    settings.DIR,
                )
            elif self.writer is not None:
                self.warn(
                    "memory",
                    "tracking-core cannot write its journal %s (%s) nor a spill journal (%s): "
                    "records go to the trackers from memory until a journal takes them again "
                    "(a crash of the delivery process meanwhile loses them; the finish summary "
                    "counts them); free space there, or point $%s / --tracking-dir elsewhere",
                    self.where,
                    failed or "it failed before",
                    self._spill_error or "none can be had",
                    settings.DIR,
                )
        if place != "memory" and self.delivery is not None:
            self.delivery.wake()


def _append(writer: JournalWriter, data: bytes) -> OSError | None:
    """Append ``data``; the error if the journal refused it (nothing half-written is left)."""
    try:
        writer.append(data)
    except OSError as exc:
        return exc
    return None

