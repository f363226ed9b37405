"""The per-process journal: every logged record, and which backend acknowledged what.

One JSON-lines file per writing process, under
``<tracking_dir>/journal/<run_id>/<label>.jsonl``. Lines, in the order they happened:

``{"t": "meta", ...}``
    first line: the run handle, the process's role, metric prefix and backends.
``{"t": "row", "s": seq, "ts": time, "m": {key: value}, "st": step, "sk": step_key}``
    one logged call (its records get sequence numbers ``s``, ``s+1``, ... in key order).
``{"t": "config", "id": n, "section": {...}}``
    a config section (already converted and redacted: the journal holds no secret).
``{"t": "ack", "b": backend, "s": seq}``
    ``backend`` acknowledged every record up to sequence number ``seq`` (backends deliver in
    order, so an ack is a watermark).
``{"t": "cack", "b": backend, "id": n}``
    ``backend`` acknowledged config ``n`` (``"close"`` for the end of the run).
``{"t": "end", "status": "FINISHED"}``
    the process finished (a primary's status is the run's).
``{"t": "delivery", "pid": n}``
    a delivery process (:mod:`tracking_core.remote`) was started for this journal.

Rows are written by the run's pump thread at most one flush interval after they were logged, so
a SIGKILL loses at most that interval. The delivery process (:class:`JournalReader`) follows the
file as it grows and appends the acknowledgements. A journal whose records every backend acknowledged is
deleted at finish; one that is left over is replayed by ``tracking-core sync``.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .records import ConfigSection

JOURNAL_DIR = "journal"


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), default=str)


def encode_value(value: float) -> float | str:
    """JSON has no NaN/inf: keep them as strings that decode back exactly."""
    if math.isfinite(value):
        return value
    return repr(value)  # 'nan', 'inf', '-inf'


def decode_value(value: float | str) -> float:
    return float(value)


def progress_path(journal: Path) -> Path:
    """The small file beside a journal in which its writer says whether it has delivered
    everything (see :mod:`tracking_core.peers`)."""
    return journal.with_name(journal.stem + ".progress")


def locked_by_live_process(path: Path) -> bool:
    """Whether a running process still holds the journal's lock (it holds it for its life)."""
    with open(path, "rb") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim(path: Path) -> int | None:
    """Take the journal's lock for a replay: the descriptor holding it (close it to let go), or
    None while another process holds it (its writer, a delivery process, another sync)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def section_to_dict(section: ConfigSection) -> dict[str, Any]:
    return asdict(section)


def section_from_dict(data: Mapping[str, Any]) -> ConfigSection:
    return ConfigSection(
        role=data.get("role"),
        namespace=data["namespace"],
        prefix=data.get("prefix", ""),
        values=data.get("values") or {},
        params=data.get("params") or {},
        report=data.get("report") or {},
    )


class _Acknowledging:
    """The lines every process that delivers a journal appends to it (its writer with thread
    delivery, the delivery process, ``tracking-core sync``), each batch in one ``write_lines``."""

    def write_lines(self, objs: list[Mapping[str, Any]]) -> Any:
        raise NotImplementedError

    def ack(self, backend: str, seq: int) -> None:
        self.write_lines([{"t": "ack", "b": backend, "s": seq}])

    def ack_config(self, backend: str, config_id: int | str) -> None:
        self.write_lines([{"t": "cack", "b": backend, "id": config_id}])

    def end(self, status: str) -> None:
        self.write_lines([{"t": "end", "status": status, "ts": time.time()}])


class Journal(_Acknowledging):
    """Append-only, one ``os.write`` per batch of lines, safe to call from several threads."""

    def __init__(self, path: Path, meta: Mapping[str, Any]) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        # Held for the life of the writing process: `tracking-core sync` leaves a locked journal
        # alone. The lock goes with the process, however it ends.
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._lock = threading.Lock()
        self.size = 0
        self._config_ids = 0
        self.closed = False
        self.write_lines([{"t": "meta", "created": time.time(), **meta}])

    def write_lines(self, objs: list[Mapping[str, Any]]) -> int:
        """Append ``objs``; returns the byte offset where they start."""
        data = "".join(_dumps(o) + "\n" for o in objs).encode()
        with self._lock:
            if self.closed:
                return self.size
            offset = self.size
            os.write(self._fd, data)
            self.size += len(data)
            return offset

    def rows(self, rows: list[tuple[int, float, dict[str, float], Any, Any]]) -> int:
        return self.write_lines(
            [
                {
                    "t": "row",
                    "s": seq,
                    "ts": ts,
                    "m": {k: encode_value(v) for k, v in metrics.items()},
                    "st": step,
                    "sk": step_key,
                }
                for seq, ts, metrics, step, step_key in rows
            ]
        )

    def config(self, section: ConfigSection) -> int:
        with self._lock:
            self._config_ids += 1
            config_id = self._config_ids
        self.write_lines([{"t": "config", "id": config_id, "section": section_to_dict(section)}])
        return config_id

    def read_rows_from(self, offset: int, limit: int) -> tuple[list[tuple], int, bool]:
        """Rows written at or after byte ``offset`` (at most ``limit``), the offset after the
        last one read, and whether the end of the journal was reached."""
        with self._lock:
            end = self.size
        return read_rows(self.path, offset, end, limit)

    def close(self, remove: bool = False) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            os.close(self._fd)
        progress = progress_path(self.path)
        for path in (progress, self.path) if remove else (progress,):
            try:
                path.unlink()
            except OSError:
                pass


def read_rows(path: Path, offset: int, end: int, limit: int) -> tuple[list[tuple], int, bool]:
    """The rows between byte ``offset`` and ``end`` of a journal (at most ``limit``), the offset
    after the last line read, and whether ``end`` was reached."""
    rows: list[tuple] = []
    with open(path, "rb") as fh:
        fh.seek(offset)
        while fh.tell() < end and len(rows) < limit:
            line = fh.readline()
            if not line.endswith(b"\n"):
                break
            obj = json.loads(line)
            if obj.get("t") == "row":
                rows.append(row_from_obj(obj))
        position = fh.tell()
    return rows, position, position >= end


class JournalReader(_Acknowledging):
    """Another process's journal, followed as it grows (the delivery process reads the training
    process's journal this way) and acknowledged into: acknowledgements are appended to the same
    file, each line in one ``os.write`` on an ``O_APPEND`` descriptor, so they never interleave
    with the writer's lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND)
        self._lock = threading.Lock()
        #: The offset up to which whole lines were read (what ``read_rows_from`` may reach).
        self.size = 0
        self.closed = False

    def poll(self) -> list[tuple[int, dict[str, Any]]]:
        """The whole lines written since the last poll, each with its byte offset."""
        out: list[tuple[int, dict[str, Any]]] = []
        with open(self.path, "rb") as fh:
            fh.seek(self.size)
            data = fh.read()
        position = self.size
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # still being written: read it whole next time
            out.append((position, json.loads(line)))
            position += len(line)
        self.size = position
        return out

    def write_lines(self, objs: list[Mapping[str, Any]]) -> None:
        data = "".join(_dumps(o) + "\n" for o in objs).encode()
        with self._lock:
            if not self.closed:
                os.write(self._fd, data)

    def read_rows_from(self, offset: int, limit: int) -> tuple[list[tuple], int, bool]:
        return read_rows(self.path, offset, self.size, limit)

    def try_lock(self) -> bool:
        """Take the journal's lock once its writer is gone (False while another process holds
        it: the writer, or a ``tracking-core sync``)."""
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def close(self, remove: bool = False) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if remove:
                for path in (progress_path(self.path), self.path):
                    try:
                        path.unlink()
                    except OSError:
                        pass
            os.close(self._fd)


def row_from_obj(obj: Mapping[str, Any]) -> tuple[int, float, dict[str, float], Any, Any]:
    return (
        int(obj["s"]),
        float(obj["ts"]),
        {k: decode_value(v) for k, v in obj["m"].items()},
        obj.get("st"),
        obj.get("sk"),
    )


@dataclass
class JournalState:
    """What a journal file says, read back (for ``tracking-core sync``)."""

    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    rows: list[tuple] = field(default_factory=list)
    configs: dict[int, dict[str, Any]] = field(default_factory=dict)
    acked: dict[str, int] = field(default_factory=dict)
    config_acked: dict[str, set[Any]] = field(default_factory=dict)
    status: str | None = None
    delivery_pids: list[int] = field(default_factory=list)

    @property
    def backends(self) -> list[str]:
        return list(self.meta.get("backends") or [])

    def pending_rows(self, backend: str) -> list[tuple]:
        """Rows with at least one record ``backend`` has not acknowledged (trimmed to those)."""
        mark = self.acked.get(backend, -1)
        out = []
        for seq, ts, metrics, step, step_key in self.rows:
            last = seq + len(metrics) - 1
            if last <= mark:
                continue
            if seq <= mark:  # a row split across batches: keep the unacknowledged tail
                keep = dict(list(metrics.items())[mark - seq + 1 :])
                out.append((mark + 1, ts, keep, step, step_key))
            else:
                out.append((seq, ts, metrics, step, step_key))
        return out

    def pending_configs(self, backend: str) -> list[tuple[int, dict[str, Any]]]:
        done = self.config_acked.get(backend, set())
        return [(i, c) for i, c in sorted(self.configs.items()) if i not in done]

    def closed_for(self, backend: str) -> bool:
        return "close" in self.config_acked.get(backend, set())


def read_journal(path: Path) -> JournalState:
    state = JournalState(path)
    with open(path, "rb") as fh:
        for line in fh:
            if not line.endswith(b"\n"):
                break  # a line cut by a crash: everything before it is whole
            obj = json.loads(line)
            kind = obj.get("t")
            if kind == "row":
                state.rows.append(row_from_obj(obj))
            elif kind == "ack":
                state.acked[obj["b"]] = max(state.acked.get(obj["b"], -1), int(obj["s"]))
            elif kind == "config":
                state.configs[int(obj["id"])] = obj["section"]
            elif kind == "cack":
                state.config_acked.setdefault(obj["b"], set()).add(obj["id"])
            elif kind == "meta":
                state.meta = obj
            elif kind == "end":
                state.status = obj.get("status")
            elif kind == "delivery":
                state.delivery_pids.append(int(obj["pid"]))
    return state


def find_journals(root: Path) -> Iterator[Path]:
    """Journal files under ``root`` (a tracking directory, a run's journal folder, or a file)."""
    if root.is_file():
        yield root
        return
    base = root / JOURNAL_DIR if (root / JOURNAL_DIR).is_dir() else root
    yield from sorted(base.rglob("*.jsonl"))
