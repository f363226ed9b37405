"""The training process's side of delivery: the caller appends, one pump thread journals.

* The training thread only appends a tuple to a deque (about a microsecond: no lock, no I/O, no
  conversion).
* The **pump** thread wakes every flush interval (at once for a config or the end), converts the
  values to float, numbers the records in the order it takes them — the journal's own order, so
  an acknowledgement "done up to n" is exact whichever threads logged — and appends them to the
  journal in one write (a SIGKILL loses at most one interval).
* Tables, histograms and texts are converted here too (plain cells, bins, redaction: see
  :mod:`tracking_core.delivery.kinds`); artifacts come from the snapshot thread once their
  snapshot is taken (:mod:`tracking_core.delivery.snapshot`).
* When the journal cannot take them (a full disk, an unusable tracking directory), the records go
  to delivery in memory instead, with one warning, and are counted; once the disk takes records
  again, delivery reads the journal again (see :mod:`tracking_core.delivery.stream`).
"""

from __future__ import annotations

import logging
import operator
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

from ..records import ConfigSection
from . import kinds, snapshot
from .journal import JournalWriter, dumps, encode_value, section_to_dict
from .modes import Delivery

log = logging.getLogger("tracking_core.delivery")

#: An item of the intake: ("row", ts, metrics, step, step_key), ("table" | "hist" | "text", ts,
#: key, held value, step, step_key[, bins]), ("artifact", entry), ("config", section),
#: ("end", status).
Item = tuple[Any, ...]


def to_float(value: Any) -> float | None:
    """A metric value as float (Python numbers, numpy and torch scalars), or None if it is not
    one (including an int too large for a float)."""
    try:
        if isinstance(value, (int, float)):
            return float(value)
        item = getattr(value, "item", None)
        if item is None:
            return None
        value = item()
        if isinstance(value, (int, float)):
            return float(value)
    except Exception:  # noqa: BLE001 - OverflowError, a non-scalar tensor, a raising item()
        return None
    return None


def _step(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return operator.index(value)
    except TypeError:
        pass
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"step {value!r} is not an integer") from None
    if not number.is_integer():
        raise ValueError(f"step {value!r} is not an integer")
    return int(number)


class Intake:
    def __init__(self, writer: JournalWriter | None, prefix: str, flush_interval: float, where: str) -> None:
        self.writer = writer
        self.prefix = prefix
        self.flush_interval = flush_interval
        self.where = where
        self.items: deque[Item] = deque()
        self.delivery: Delivery | None = None
        self.next_n = 0
        self.logged = 0
        self.not_journaled = 0
        self.skipped: Counter[str] = Counter()
        self._on_disk = writer is not None
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tracking-core-pump", daemon=True)
        self.redact = kinds.redacts_text()
        self._encoded: dict[int, str] = {}  # record number -> its line, for those encoded to check them
        self.snapshots = snapshot.Snapshotter(writer.folder if writer is not None else None, self._snapshotted)

    def start(self, delivery: Delivery | None) -> None:
        self.delivery = delivery
        self._thread.start()

    # -- the caller's side ------------------------------------------------------------------
    def config(self, section: ConfigSection) -> None:
        self.items.append(("config", section))
        self._wake.set()

    def artifact(self, held: snapshot.Held) -> None:
        self.snapshots.put(held)

    def _snapshotted(self, entry: dict[str, Any]) -> None:
        self.items.append(("artifact", entry))
        self._wake.set()

    def end(self, status: str, timeout: float = 0.0) -> int:
        """Journal the end (after the artifacts being snapshotted, for up to ``timeout``);
        returns its record number."""
        complete = self.snapshots.wait(timeout)
        self.snapshots.close()
        if not complete:
            log.warning(
                "tracking-core: the run ends while artifacts are still being copied for their "
                "snapshot; those are not delivered (give finish() a longer timeout)"
            )
        self.items.append(("end", status))
        return self.pump()

    # -- the pump ---------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            try:
                self.pump()
            except Exception:  # noqa: BLE001 - never let the pump die
                log.exception("tracking-core's pump hit an internal error")

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def pump(self) -> int:
        """Journal what was logged since the last pump; returns the last record number."""
        with self._lock:
            lines: list[dict[str, Any]] = []
            while self.items:
                line = self._line(self.items.popleft())
                if line is not None:
                    lines.append(line)
            if lines:
                self._write(lines)
            return self.next_n - 1

    def _line(self, item: Item) -> dict[str, Any] | None:
        kind = item[0]
        try:
            if kind == "row":
                return self._row(*item[1:])
            if kind in kinds.NOUNS and kind != "artifact":
                return self._rich(*item)
            if kind == "artifact":
                obj = {"n": self.next_n, **item[1]}
                snapshot.number(obj, self.next_n)
            elif kind == "config":
                obj = {"n": self.next_n, "t": "config", "section": section_to_dict(item[1])}
            else:
                obj = {"n": self.next_n, "t": "end", "status": str(item[1]), "ts": time.time()}
            self._encoded[obj["n"]] = dumps(obj)  # fails here, not in the journal write
            if kind == "artifact":
                self.logged += 1
        except Exception as exc:  # noqa: BLE001 - one bad item never stops the others
            self._warn_once(f"item-{kind}", "tracking-core could not journal a %s (%s: %s); it is skipped", kind, type(exc).__name__, exc)
            return None
        self.next_n += 1
        return obj

    def _row(self, ts: float, metrics: Mapping[Any, Any], step: Any, step_key: Any) -> dict[str, Any] | None:
        values: dict[str, float | str] = {}
        for key, raw in metrics.items():
            name = kinds.NAMES[key]  # the name as str, secret shapes replaced (cached)
            value = to_float(raw)
            if value is None:
                self.skipped[self.prefix + name] += 1
                self._warn_once(
                    f"value-{name}",
                    "metric %r: %r is not a number; its values are skipped and counted in the "
                    "finish summary",
                    self.prefix + name,
                    type(raw).__name__,
                )
                continue
            values[name] = encode_value(value)
        step = self._checked_step(step)
        if not values:
            return None
        self.logged += len(values)
        obj = {"n": self.next_n, "t": "row", "ts": ts, "m": values, "st": step, "sk": None if step_key is None else str(step_key)}
        self.next_n += 1
        return obj

    def _checked_step(self, step: Any) -> int | None:
        try:
            return _step(step)
        except ValueError as exc:
            self._warn_once("step", "tracking-core: %s; logged without a step", exc)
            return None

    def _rich(self, kind: str, ts: float, key: Any, value: Any, step: Any, step_key: Any, bins: int = 0) -> dict[str, Any] | None:
        name = kinds.NAMES[key if isinstance(key, str) else str(key)]  # secret shapes replaced
        obj: dict[str, Any] = {"n": self.next_n, "t": kind, "ts": ts, "k": name}
        try:
            if kind == "table":
                obj["cols"], obj["rows"] = kinds.table_entry(value, self.redact)
            elif kind == "hist":
                obj["h"] = kinds.histogram_entry(value, bins)
            else:
                obj["x"] = kinds.text_entry(value, self.redact)
            obj["st"] = self._checked_step(step)
            obj["sk"] = None if step_key is None else str(step_key)
            self._encoded[obj["n"]] = dumps(obj)
        except Exception as exc:  # noqa: BLE001 - bad input is reported, never raised
            self.skipped[self.prefix + name] += 1
            self._warn_once(
                f"{kind}-{name}",
                "%s %r could not be logged (%s: %s); it is skipped and counted in the finish summary",
                {"table": "table", "hist": "histogram", "text": "text"}[kind],
                self.prefix + name,
                type(exc).__name__,
                exc,
            )
            return None
        self.logged += 1
        self.next_n += 1
        return obj

    def _write(self, lines: list[dict[str, Any]]) -> None:
        encoded = self._encoded
        data = "".join((encoded.pop(o["n"], None) or dumps(o)) + "\n" for o in lines).encode()
        first = lines[0]["n"]
        if self.writer is not None:
            try:
                self.writer.append(data)
            except OSError as exc:
                self._journal_failed(first, exc)
            else:
                if not self._on_disk:
                    self._on_disk = True
                    self._warned.discard("disk")
                    log.warning("tracking-core's journal %s takes records again", self.where)
                    if self.delivery is not None:
                        self.delivery.feed(("disk", first))
                if self.delivery is not None:
                    self.delivery.wake()
                return
        self.not_journaled += sum(len(o["m"]) if o["t"] == "row" else 1 for o in lines)
        if self.delivery is not None:
            self.delivery.feed(("records", lines))

    def _journal_failed(self, first: int, exc: OSError) -> None:
        if self._on_disk:
            self._on_disk = False
            if self.delivery is not None:
                self.delivery.feed(("memory", first))
        self._warn_once(
            "disk",
            "tracking-core cannot write its journal %s (%s): records go to the trackers from "
            "memory until the disk takes them again (a crash meanwhile loses them); free space "
            "there, or point $TRACKING_CORE_DIR / --tracking-dir elsewhere",
            self.where,
            exc,
        )

    def _warn_once(self, kind: str, msg: str, *args: Any) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning(msg, *args)
