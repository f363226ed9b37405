"""The delivery process: runs one writer's follower (not a command for users).

Started by :class:`tracking_core.delivery.client.ProcessDelivery` as ``python -m
tracking_core.delivery.process``. Its stdin carries the plan (first line), then ``feed``,
``drain``, ``finish`` and ``stop`` requests, one JSON object per line (the types and their wire
form: :mod:`.messages`); its original stdout
carries events back (``ready``, ``opened``, ``report``, ``done``, ``log``, and ``call``: which
backend's code runs now and on which thread, sent before and after each call into a tracker; and
a fatal signal's report (:mod:`faulthandler`) goes to the file ``crash_fd`` the first line names, so
that the training process knows whose code crashed it if this process dies). Its stderr is its
own log file (:func:`~tracking_core.delivery.client.log_path`, never the training process's
stdout or stderr, which would stay open as long as this process runs) and fd 1 is pointed there
too, so what a tracker prints goes there; log records and Python warnings go to the training
process as ``log`` events (to the log file once it is gone). SIGINT is ignored (the job's Ctrl-C
is the training process's to handle).

Its parent is the :mod:`keeper <tracking_core.delivery.keeper>`, outside the training process's
tree, so that a launcher ending the training process's children (Ray, when its worker exits) or
its tree does not end delivery. It watches the training process itself: the pidfd the first line names (``training``),
else the training process's pid, and its stdin's end. When the training process is gone without
a ``finish`` (SIGKILL, ``os._exit``, its Ray worker ended), the follower reads the journal to its
end, journals the run's end as KILLED, delivers within the exit timeout and applies the
completion rule, exactly as ``tracking-core sync`` would, and the process exits.

``tracking-core sync`` starts this process too, to deliver one backend of a journal (a plan
marked ``replay``): the sync holds the journal's lock and hands it down (``lock_fd``), the
process reports its progress as ``acks`` events instead of saving it, delivers to the journal's
end on a ``replay`` request and exits; when the sync, its parent, is gone it stops.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ..plugins import get_plugin_manager
from ..views import sync_command
from .client import log_path
from .failures import FAILURE
from .follower import Follower
from .journal import WRITER_LOCK, Acks, held
from .messages import (
    Call,
    Done,
    Drain,
    Event,
    Feed,
    Finish,
    Log,
    Opened,
    Progressed,
    Ready,
    Replay,
    Report,
    Request,
    Start,
    Stop,
    decode_request,
    line,
)
from .plan import Plan

log = logging.getLogger("tracking_core.delivery")


class Channel:
    """Events to the training process, one JSON line each, from any thread."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, event: Event) -> bool:
        """False when the training process is gone (the journal keeps everything)."""
        data = line(event)
        with self._lock:
            try:
                self._stream.write(data)
                self._stream.flush()
            except (OSError, ValueError):
                return False
        return True


class RelayedAcks(Acks):
    """Progress sent to the ``tracking-core sync`` that started this process, which alone
    writes the journal's ``acks.json`` while it delivers each backend in a process of its own."""

    def __init__(self, folder: Path, names: list[str], channel: Channel) -> None:
        super().__init__(folder, names)
        self.channel = channel
        self._sent: dict[str, Any] = {}
        # Saved from every backend's thread and the follower's: one at a time, so that a newer
        # progress is never sent before an older one (the sync keeps the last it reads).
        self._relay = threading.Lock()

    def save(self) -> bool:
        with self._relay:
            with self._lock:
                data = {name: p.to_dict() for name, p in self.progress.items()}
            if data != self._sent:
                self._sent = data
                self.channel.send(Progressed(data))
        return True


class ForwardLogs(logging.Handler):
    """Hands log records to the training process, whose logging configuration decides; once it
    is gone, they go to this process's own log (its stderr: see ``client.log_path``)."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self.channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
            if record.exc_info:
                msg += "\n" + logging.Formatter().formatException(record.exc_info)
            failure = getattr(record, FAILURE, None)  # the receiver collapses repeats too
            event = Log(record.name, record.levelno, msg, failure if isinstance(failure, dict) else None)
            if not self.channel.send(event):
                sys.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {record.levelname} {record.name}: {msg}\n")
                sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging must never fail delivery
            pass


class Training:
    """Whether the process this one delivers for is gone: the training process, through the
    pidfd or pid the first line names (this process is not its child), else this process's
    parent (``tracking-core sync``, which starts it directly)."""

    def __init__(self, info: Mapping[str, Any] | None) -> None:
        info = info or {}
        self._pid: int | None = info.get("pid")
        self._pidfd: int | None = info.get("pidfd")
        self._parent = os.getppid()

    def gone(self) -> bool:
        """Safe from any thread. Asked by the main loop and by a finish's answer at once, so each
        call has a poll object of its own: one refuses a second caller (``RuntimeError:
        concurrent poll() invocation``), which ended the main thread and then the process
        (SIGABRT at shutdown, a daemon thread holding stdin)."""
        if self._pid is None:
            return os.getppid() != self._parent
        if self._pidfd is not None:
            poll = select.poll()
            poll.register(self._pidfd, select.POLLIN)
            with contextlib.suppress(OSError):
                events = poll.poll(0)
                if not any(mask & (select.POLLERR | select.POLLNVAL) for _, mask in events):
                    return bool(events)  # a pidfd is readable once its process ended
            self._pidfd = None  # not a usable pidfd: the pid then
        try:
            os.kill(self._pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False


class Child:
    def __init__(self, plan: Plan, follower: Follower, channel: Channel, training: Training) -> None:
        self.plan = plan
        self.follower = follower
        self.channel = channel
        self.training = training
        self.finishing = threading.Event()
        self._last: Any = None

    def handle(self, request: Request | None) -> None:
        if isinstance(request, Feed):
            self.follower.feed(request.message)
        elif isinstance(request, (Drain, Finish, Replay)):
            if not isinstance(request, Drain):
                self.finishing.set()
            threading.Thread(target=self._answer, args=(request,), daemon=True).start()
        elif isinstance(request, Stop):
            self.follower.stop()
            os._exit(0)

    def _answer(self, request: Drain | Finish | Replay) -> None:
        timeout = request.timeout
        if isinstance(request, Drain):
            ok = self.follower.drain(request.target, timeout)
            self.channel.send(Done(request.id, ok, self.follower.report()))
            return
        end = self.follower.replay_end() if isinstance(request, Replay) else request.end
        if isinstance(request, Finish) and self.training.gone():
            # Read after the training process gave up waiting (this process was stopped): no
            # one waits on its bound any more; the rest is delivered as an orphan's would be.
            timeout = max(timeout or 0.0, self.plan.exit_timeout)
        report = self.follower.finish(end, timeout or 0.0)
        self.channel.send(Done(request.id, not report["outstanding"], report))
        _drop_own_log(self.plan)
        os._exit(0)

    def send_report(self) -> None:
        report = self.follower.report()
        if report != self._last:
            self._last = report
            self.channel.send(Report(report))

    def orphaned(self) -> None:
        """The training process is gone without finishing: deliver the rest, bounded."""
        folder = self.follower.folder
        if folder is None:
            return
        deadline = time.monotonic() + 5.0
        while held(folder / WRITER_LOCK) and time.monotonic() < deadline:
            time.sleep(0.05)  # the kernel releases a dead process's locks
        end = self.follower.replay_end("KILLED")
        report = self.follower.finish(end, self.plan.exit_timeout)
        if report["outstanding"]:
            log.warning(
                "the process that wrote %s ended without finishing its run; what could not be "
                "delivered within %.0f s stays in its journal: run `%s` (%s)",
                folder,
                self.plan.exit_timeout,
                sync_command(folder),
                "; ".join(f"{k}: {v}" for k, v in report["outstanding"].items()),
            )


def _requests(stream: IO[bytes], child: Child, gone: threading.Event) -> None:
    for raw in stream:
        try:
            child.handle(decode_request(json.loads(raw)))
        except Exception:  # noqa: BLE001 - a bad request must not end delivery
            log.exception("tracking-core's delivery process got a request it could not read")
    gone.set()


def main() -> None:
    channel = Channel(os.fdopen(os.dup(1), "wb"))
    os.dup2(2, 1)  # what a tracker prints goes to stderr, not into the event stream
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin = sys.stdin.buffer
    try:
        first = Start.decode(json.loads(stdin.readline()))
        plan = Plan.from_dict(first.plan)
    except Exception as exc:  # noqa: BLE001
        print(f"tracking-core delivery process: unreadable plan ({exc})", file=sys.stderr)
        os._exit(2)
    sys.argv = list(first.argv)
    if first.crash_fd is not None:
        # else (or if it fails) a crash is charged to every tracker inside a call
        with contextlib.suppress(OSError, ValueError):
            faulthandler.enable(file=int(first.crash_fd), all_threads=True)
    root = logging.getLogger()
    root.setLevel(first.log_level)
    root.addHandler(ForwardLogs(channel))
    logging.captureWarnings(True)  # a tracker's Python warnings reach the training process too
    # Trackers' HTTP clients warn on every retry; the worker reports each failure kind once.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    training = Training(first.training)

    def opened(name: str, result: Any) -> None:
        channel.send(Opened(name, result))

    def calling(name: str, hook: str | None) -> None:
        channel.send(Call(name, hook, threading.get_ident()))

    try:
        acks = RelayedAcks(Path(plan.folder), [b.name for b in plan.backends], channel) if plan.replay and plan.folder else None
        lock_fd = first.lock_fd if plan.replay else None
        follower = Follower(
            plan, get_plugin_manager(), on_opened=opened, lock_timeout=5.0, lock_fd=lock_fd, acks=acks, on_call=calling
        )
    except Exception:  # noqa: BLE001 - the training process falls back to a thread
        log.exception("tracking-core's delivery process could not start")
        os._exit(1)
    follower.start()
    channel.send(Ready(os.getpid()))
    child = Child(plan, follower, channel, training)
    gone = threading.Event()
    threading.Thread(target=_requests, args=(stdin, child, gone), daemon=True).start()
    while not gone.wait(plan.poll):
        if training.gone():
            break
        child.send_report()
    if plan.replay:  # the sync that started this process is gone: so is the lock it handed down
        follower.stop()
        os._exit(0)
    while child.finishing.is_set():  # the finish answers and exits; the training process may be gone already
        time.sleep(1.0)
    child.orphaned()
    _drop_own_log(plan)
    os._exit(0)


def _drop_own_log(plan: Plan) -> None:
    """This process's log (its stderr), when it is still empty at the end, is not left behind."""
    path = log_path(plan)
    if path is None:
        return
    try:
        mine, there = os.fstat(2), os.stat(path)
    except OSError:
        return
    if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino) and not there.st_size:
        with contextlib.suppress(OSError):
            os.unlink(path)


if __name__ == "__main__":
    try:
        main()
    except BaseException:  # noqa: BLE001
        # Never an interpreter shutdown while daemon threads run: the request reader holds
        # stdin's lock, and the shutdown aborts on it ("_enter_buffered_busy": a SIGABRT that
        # looks like a tracker's crash). An exit status of 1 is a plain failure: restarted.
        log.exception("tracking-core's delivery process failed (the journal keeps what it had not delivered)")
        os._exit(1)
