"""The delivery process: builds one writing process's backends and delivers its journal.

Started by :class:`tracking_core.remote.DeliveryProcess` as ``python -m
tracking_core.delivery_process``; not a command for users. Its stdin carries the setup (first
line), then requests (``flush``, ``close``, ``stop``), one JSON object per line; its original
stdout carries events back (``ready``, ``opened``, ``first``, ``status``, ``done``, ``log``); fd 1
is pointed at stderr, so that what a tracker prints goes where the training process's errors go.

Each backend gets the same :class:`~tracking_core.dispatch.BackendWorker` as in-process delivery
(batching, retries, circuit breaker, spill), reading rows and configs from the journal as the
training process appends them and acknowledging into it. If the journal already holds
acknowledgements (a delivery process started again for the same journal), what they cover is
not sent again. When the training process is gone without a ``stop`` (SIGKILL, ``os._exit``),
this process takes the journal's lock, delivers the rest within the exit timeout, closes the run
as KILLED and exits.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from .context import RunContext
from .dispatch import BackendWorker, local_workers
from .handle import RunHandle, attach_arguments
from .journal import JournalReader, read_journal, row_from_obj, section_from_dict
from .plugins import get_plugin_manager
from .records import RunStatus

log = logging.getLogger("tracking_core.delivery")


class Channel:
    """Events to the training process, one JSON line each, from any thread."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, obj: Mapping[str, Any]) -> None:
        data = (json.dumps(obj, default=str) + "\n").encode()
        with self._lock:
            try:
                self._stream.write(data)
                self._stream.flush()
            except (OSError, ValueError):
                pass  # the training process is gone; the journal keeps everything


class ForwardLogs(logging.Handler):
    """Hands log records to the training process, whose logging configuration decides."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self.channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
            if record.exc_info:
                msg += "\n" + logging.Formatter().formatException(record.exc_info)
            self.channel.send({"ev": "log", "name": record.name, "level": record.levelno, "msg": msg})
        except Exception:  # noqa: BLE001 - logging must never fail delivery
            pass


class Delivery:
    """The workers of one writing process and the journal they follow."""

    def __init__(self, setup: Mapping[str, Any], channel: Channel) -> None:
        self.channel = channel
        self.flush_interval = float(setup["flush_interval"])
        self.exit_timeout = float(setup["exit_timeout"])
        self.journal = JournalReader(Path(setup["journal"]))
        self.handle = RunHandle.parse(setup["handle"])
        self.rows = 0
        self.closed: set[str] = set()
        self._lock = threading.Lock()
        self._last_status: Any = None
        manager = get_plugin_manager()
        entries = setup["backends"]
        specs = manager.select([e["name"] for e in entries])
        contexts = {}
        for entry in entries:
            data = dict(entry["context"])
            data["tracking_dir"] = Path(data["tracking_dir"])
            contexts[entry["name"]] = RunContext(**data)
        self.slots, self.workers = local_workers(
            specs,
            manager,
            contexts,
            prefix=setup["prefix"],
            journal=self.journal,
            lock=self._lock,
            flush_interval=self.flush_interval,
        )
        self.acked_configs = self._already_acknowledged()
        for entry in entries:
            if entry.get("action"):
                self._start(entry["name"], entry["action"])

    def _already_acknowledged(self) -> dict[str, set[Any]]:
        state = read_journal(self.journal.path)
        for name, worker in self.workers.items():
            worker.acked_through = state.acked.get(name, -1)
        return {name: set(state.config_acked.get(name, ())) for name in self.workers}

    def _start(self, name: str, action: str) -> None:
        channel = self.channel

        class First(threading.Event):
            def set(self) -> None:
                if not self.is_set():
                    channel.send({"ev": "first", "b": name})
                super().set()

        payload: dict[str, Any] = {
            "first": First(),
            "on_success": lambda result: channel.send({"ev": "opened", "b": name, "result": result}),
            "kwargs": attach_arguments(self.handle, name) if action == "attach" else dict,
        }
        self.workers[name].submit(action, payload)

    # -- following the journal -----------------------------------------------------------------
    def pump(self) -> None:
        """Hand what the journal gained since the last look to every worker, in order."""
        with self._lock:
            batch: list[tuple] = []
            start = 0
            for offset, obj in self.journal.poll():
                kind = obj.get("t")
                if kind == "row":
                    if not batch:
                        start = offset
                    batch.append(row_from_obj(obj))
                    continue
                self._rows(batch, start)
                batch = []
                if kind == "config":
                    section = section_from_dict(obj["section"])
                    for name, worker in self.workers.items():
                        if obj["id"] not in self.acked_configs[name]:
                            worker.submit("config", (section, obj["id"]))
            self._rows(batch, start)

    def _rows(self, rows: list[tuple], offset: int) -> None:
        if not rows:
            return
        self.rows += len(rows)
        for worker in self.workers.values():
            worker.enqueue_rows(rows, offset)
            worker.wake()

    def status(self, force: bool = False) -> None:
        backends = {
            name: {
                "idle": w.idle,
                "delivered": w.delivered,
                "spills": w.spills,
                "ready": w.ready,
                "circuit_open": w.circuit_open,
                "failures": dict(w.failures.counts),
            }
            for name, w in self.workers.items()
        }
        state = {"rows": self.rows, "backends": backends}
        if force or state != self._last_status:
            self._last_status = state
            self.channel.send({"ev": "status", **state})

    # -- requests ------------------------------------------------------------------------------
    def answer(self, op: Mapping[str, Any]) -> None:
        """Answer one request (on its own thread: a flush may wait for a slow tracker)."""
        worker = self.workers.get(op.get("b", ""))
        ok = False
        try:
            self.pump()
            if worker is None:
                pass
            elif op["op"] == "flush":
                timeout = op.get("timeout")
                ok = worker.flush(None if timeout is None else float(timeout))
            elif op["op"] == "close":
                ok = self._close(worker, RunStatus(op["status"]), None)
        finally:
            self.status()
            self.channel.send({"ev": "done", "id": op["id"], "ok": ok})

    def _close(self, worker: BackendWorker, status: RunStatus, timeout: float | None) -> bool:
        if worker.name in self.closed or "close" in self.acked_configs[worker.name]:
            return True
        self.closed.add(worker.name)
        return worker.submit("close", status).wait(timeout)

    def stop(self) -> None:
        for worker in self.workers.values():
            worker.stop()
        self.status(force=True)

    def orphaned(self) -> None:
        """The training process is gone without stopping us: deliver the rest, bounded."""
        if not self.journal.try_lock():
            log.warning(
                "the process that wrote %s is gone and another process holds its journal; "
                "leaving it to that one",
                self.journal.path,
            )
            return
        deadline = time.monotonic() + self.exit_timeout
        self.pump()
        for worker in self.workers.values():
            self._close(worker, RunStatus.KILLED, max(0.0, deadline - time.monotonic()))
        drained = all(w.flush(max(0.0, deadline - time.monotonic())) for w in self.workers.values())
        self.journal.end(RunStatus.KILLED.value)
        complete = drained and self._complete()
        self.journal.close(remove=complete)
        if not complete:
            log.warning(
                "the process that wrote %s ended without finishing its run; what could not be "
                "delivered within %.0f s stays in it: run `tracking-core sync`",
                self.journal.path,
                self.exit_timeout,
            )

    def _complete(self) -> bool:
        state = read_journal(self.journal.path)
        return all(
            not state.pending_rows(name) and not state.pending_configs(name) for name in self.workers
        )


def _requests(stream: IO[bytes], delivery: Delivery, gone: threading.Event) -> None:
    for line in stream:
        op = json.loads(line)
        if op.get("op") == "stop":
            delivery.stop()
            os._exit(0)
        threading.Thread(target=delivery.answer, args=(op,), daemon=True).start()
    gone.set()


def main() -> None:
    events = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what a tracker prints goes to stderr, not into the event stream
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = Channel(events)
    stdin = sys.stdin.buffer
    setup = json.loads(stdin.readline())
    sys.argv = list(setup.get("argv") or ["tracking-core"])
    root = logging.getLogger()
    root.setLevel(int(setup.get("log_level", logging.WARNING)))
    root.addHandler(ForwardLogs(channel))
    parent = os.getppid()
    try:
        delivery = Delivery(setup, channel)
    except Exception:  # noqa: BLE001 - the training process falls back to in-process delivery
        log.exception("tracking-core's delivery process could not start")
        os._exit(1)
    channel.send({"ev": "ready", "pid": os.getpid()})
    gone = threading.Event()
    threading.Thread(target=_requests, args=(stdin, delivery, gone), daemon=True).start()
    while not gone.wait(delivery.flush_interval):
        if os.getppid() != parent:
            break
        try:
            delivery.pump()
            delivery.status()
        except Exception:  # noqa: BLE001 - keep delivering
            log.exception("tracking-core delivery hit an internal error")
    delivery.orphaned()
    os._exit(0)


if __name__ == "__main__":
    main()
