"""The training process's side of a delivery process.

:class:`ProcessDelivery` starts ``python -m tracking_core.delivery.process`` through the
:mod:`keeper <tracking_core.delivery.keeper>`, in a session of its own (a SIGINT or SIGTERM meant
for the job's process group does not cut delivery short), and returns at once: the child opens
the backends and follows the journal by itself. Only small messages cross its pipes: the plan
(first line), records the writer could not journal, drain and finish requests and their answers,
which backend opened with what, and the child's log records (re-emitted here through this
process's ``logging``). A sender thread writes to the child, so neither the training thread nor
the pump ever waits on a pipe.

The delivery process is never this process's child nor in its process tree, always: the keeper
forks, and its child, which init inherits at once, starts the delivery process. Ray kills a
worker's direct children when the worker exits (and its process group): a delivery process
started by a Ray actor died with it, losing what it had not delivered, when the job ended; other
launchers walk the tree. Out of the tree it is out of reach of all of them, and it watches this
process itself (a pidfd where the kernel has them, else the pid): when training is gone without a
finish it delivers the rest within the exit timeout and exits, as after any other death of
training. The keeper waits for it and sends its exit status here (``exited``), so crash
attribution (below) is as it was, and every process is reaped. Detaching only under Ray (its
workers have ``RAY_RAYLET_PID`` in their environment) would save one small process per writer,
but would leave the path every Ray job takes to one test and every other job on another, and
would not help under other launchers. So there is one way, exercised by every test.

A child that dies is started again, up to :data:`MAX_RESTARTS` times; the new one resumes from
the journal's acknowledgements and gets any request still waiting for an answer. The child says
before and after each call into a tracker whose code runs (``call`` events), so a child that
kills itself (a segfault or ``abort()`` in a tracker's C extension) is charged to the tracker(s)
inside a call on the thread the fatal signal hit (the report :mod:`faulthandler` writes, or
the interpreter's own "Fatal Python error" in the child's log), not to the others, and not to any
tracker when that thread was in none of their calls: restarts are counted per tracker, and one that brought
the child down :data:`MAX_RESTARTS` times is left out of the next child (its records stay in the
journal for ``tracking-core sync``; the summary says so) while the other trackers go on live. A child that
cannot start at all (it dies before saying it is ready) is replaced by the same follower on a
thread of this process.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..config.secrets import redact_argv
from ..views import sync_command
from .messages import (
    Call,
    Done,
    Drain,
    Event,
    Exited,
    Feed,
    Finish,
    Log,
    Opened,
    Ready,
    Report,
    Start,
    Started,
    decode_event,
    line,
)
from .plan import Plan
from .stream import Delivery, Message

log = logging.getLogger("tracking_core.delivery")

MAX_RESTARTS = 3
#: How much longer than a request's own timeout to wait for the child's answer.
REPLY_GRACE = 0.5
#: Messages waiting for the child beyond this are dropped (counted): the child is stuck.
MAX_OUTBOX = 100_000
#: Of a finish's timeout, what is kept for the child's answer to arrive and the child to exit.
FINISH_MARGIN = 0.3
#: The program that starts the delivery process and waits for it (run by its path).
KEEPER = str(Path(__file__).with_name("keeper.py"))
#: Deaths a process inflicts on itself (a crash in native code, ``abort()``): charged to the
#: tracker whose code ran. A SIGKILL or SIGTERM comes from outside (the OOM killer, a person).
#: The thread a fatal signal hit, as :mod:`faulthandler` (or a fatal error) reports it, and
#: its innermost frame.
CRASHED_THREAD = re.compile(r"^Current thread (0x[0-9a-fA-F]+)[^\n]*\n(?:\s*(.+))?", re.MULTILINE)
FATAL_ERROR = re.compile(r"^Fatal Python error: (.+)$", re.MULTILINE)
FRAME = re.compile(r'File "(.+)", line (\d+) in (\S+)')
#: How much of a dead child's log is read for its fatal error report.
CRASH_REPORT_MAX = 1 << 16
SELF_INFLICTED = frozenset(
    int(getattr(signal, name)) for name in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGSYS", "SIGTRAP") if hasattr(signal, name)
)


#: The numbers of requests that wait for an answer.
_IDS = itertools.count(1)


@dataclass
class _Waiting:
    """A request sent to the delivery process, until its answer comes (or its time is up)."""

    request: Drain | Finish
    deadline: float | None
    answered: threading.Event = field(default_factory=threading.Event)
    answer: Done | None = None

    @property
    def left(self) -> float | None:
        """The time left until its deadline (None: no deadline)."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


class ProcessDelivery:
    pid: int | None = None

    def __init__(self, plan: Plan, on_opened: Callable[[str, Any], None], fallback: Callable[[], Delivery]) -> None:
        self.plan = plan
        self._on_opened = on_opened
        self._fallback = fallback
        self._local: Delivery | None = None
        self._waiting: dict[int, _Waiting] = {}
        self._lock = threading.Lock()
        self._report: dict[str, Any] = {}
        self._done = False
        self.restarts = 0
        #: per tracker, how often the child died while that tracker's code ran
        self.crashes: Counter[str] = Counter()
        self.dropped = 0
        self._spawn()

    @property
    def serves(self) -> str:
        """Which writer this delivery process serves, for every message about its end: its role
        and rank, or the driver, and its label (``actor rank 0 (actor-r0-p4242)``)."""
        plan = self.plan
        context = plan.backends[0].context if plan.backends else {}
        label = context.get("label") or (Path(plan.folder).name if plan.folder else None)
        role, rank = context.get("role"), context.get("rank")
        who = "the driver" if context.get("primary") or not role else f"{role} rank {rank if rank is not None else 0}"
        return f"{who} ({label})" if label else who

    # -- the child ---------------------------------------------------------------------------
    def _spawn(self) -> None:
        self._crash_fd = _crash_report_file()
        # Its own log, not this process's stderr: a pipe (`train.py 2>&1 | tee`) closes when
        # training ends, however long delivery goes on (or if it is stopped). A backend that
        # writes to the terminal (the console) keeps this process's stderr instead.
        log_fd, self.log_path = (None, None) if self.plan.terminal else _open_log(self.plan)
        # Where this child's own output starts in the log (a restarted child appends to it).
        self._log_start = os.fstat(log_fd).st_size if log_fd is not None else 0
        # The delivery process watches this process through it (see the module docstring).
        training_fd = _own_pidfd()
        first = Start(
            plan=json.loads(self.plan.to_json()),
            log_level=logging.getLogger("tracking_core").getEffectiveLevel(),
            # The command line crosses redacted: the trackers there record it (W&B, SwanLab).
            argv=redact_argv(getattr(sys, "argv", None) or []),
            crash_fd=self._crash_fd,
            training={"pid": os.getpid(), "pidfd": training_fd},
        )
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", KEEPER, sys.executable, "-m", "tracking_core.delivery.process"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None if self.plan.terminal else subprocess.DEVNULL if log_fd is None else log_fd,
                # The child imports what this process imports, even from paths added at run time.
                env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
                start_new_session=True,
                close_fds=True,
                pass_fds=tuple(fd for fd in (self._crash_fd, training_fd) if fd is not None),
            )
        finally:
            for fd in (log_fd, training_fd):
                if fd is not None:
                    os.close(fd)
        assert proc.stdin is not None and proc.stdout is not None
        # The delivery process's pid comes from the keeper's first line ("started").
        self.proc, self.pid, self._ready = proc, None, False
        self._closed = threading.Event()  # set when the child and its keeper are gone
        self._inside: dict[str, tuple[str, int]] = {}  # tracker -> the call it is in, its thread
        self._outbox: queue.Queue[bytes | None] = queue.Queue()
        self._outbox.put(line(first))
        threading.Thread(target=self._send_loop, args=(proc.stdin, self._outbox), name="tracking-core-delivery-send", daemon=True).start()
        threading.Thread(target=self._read_loop, args=(proc, self._closed), name="tracking-core-delivery-read", daemon=True).start()

    def _send(self, request: Feed | Drain | Finish) -> None:
        if self._outbox.qsize() >= MAX_OUTBOX:
            self.dropped += 1
            return
        self._outbox.put(line(request))

    @staticmethod
    def _send_loop(stream: IO[bytes], outbox: queue.Queue[bytes | None]) -> None:
        for data in iter(outbox.get, None):  # None: nothing more to send
            try:
                stream.write(data)
                stream.flush()
            except (OSError, ValueError):
                break  # the child is gone: its reader notices
        with contextlib.suppress(OSError):
            stream.close()

    def _read_loop(self, proc: subprocess.Popen[bytes], closed: threading.Event) -> None:
        assert proc.stdout is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)  # the keeper's first process exits once it forked: reaped at once
        # Its own failure (it could not fork), else the child's exit status, which its keeper
        # sends; None when neither says (the keeper killed: a death from outside).
        code: int | None = proc.poll() or None
        keeper: int | None = None
        for raw in proc.stdout:
            try:
                event = decode_event(json.loads(raw))
                if isinstance(event, Exited):
                    code = event.code
                    continue
                if isinstance(event, Started):
                    keeper = event.keeper
                self._on_event(event)
            except Exception:  # noqa: BLE001 - a bad line must not end the reader
                log.exception("tracking-core could not read a message of its delivery process")
        closed.set()
        _reap_if_ours(keeper)
        self._ended(code)

    def _on_event(self, event: Event | None) -> None:
        if isinstance(event, Report):
            self._report = event.report
        elif isinstance(event, Done):
            with self._lock:
                waiting = self._waiting.pop(event.id, None)
            if waiting is not None:
                if isinstance(waiting.request, Finish):
                    self._done = True  # the child exits now: that is no death to recover from
                waiting.answer = event
                self._report = event.report or self._report
                waiting.answered.set()
        elif isinstance(event, Opened):
            for backend in self.plan.backends:
                if backend.name == event.backend:
                    backend.action, backend.entry = "attach", dict(event.result or {})
            self._on_opened(event.backend, event.result)
        elif isinstance(event, Call):
            if event.hook:
                self._inside[event.backend] = (event.hook, event.thread)
            else:
                self._inside.pop(event.backend, None)
        elif isinstance(event, Log):
            event.emit()
        elif isinstance(event, Ready):
            self._ready = True
        elif isinstance(event, Started):
            self.pid = event.pid

    def _ended(self, code: int | None) -> None:
        if self._done:
            _read_and_close(self._crash_fd)
            return
        # A tracker that brought the child down is charged first, even before the child said it
        # was ready: such a child must never be replaced by threads of this process.
        culprits, how = self._culprits(code)
        if culprits:
            self._charge(culprits, code, how)
            if not self.plan.backends:
                self._give_up()
                return
        elif not self._ready:
            log.warning(
                "tracking-core's delivery process for %s could not start (%s; its errors are "
                "in %s); delivering on threads of this process instead",
                self.serves,
                how,
                self.log_path or "this process's stderr",
            )
            self._local = self._fallback()
        elif self.restarts >= MAX_RESTARTS:
            log.warning(
                "tracking-core's delivery process for %s ended unexpectedly (%s) after %d "
                "restarts; what this process logs from now on stays in its journal: run `%s`",
                self.serves,
                how,
                self.restarts,
                _sync_command(self.plan),
            )
            self._give_up()
            return
        else:
            self.restarts += 1
            log.warning(
                "tracking-core's delivery process for %s ended unexpectedly (%s); starting it "
                "again (%d of %d): it resumes from the journal",
                self.serves,
                how,
                self.restarts,
                MAX_RESTARTS,
            )
        if self._local is None:
            self._spawn()
        self._replay_waiting()

    def _give_up(self) -> None:
        """No delivery process any more: what is left waits for ``tracking-core sync``."""
        self._done = True
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for pending in waiting.values():
            pending.answered.set()

    def _culprits(self, code: int | None) -> tuple[dict[str, str], str]:
        """The trackers whose code crashed the child (tracker -> the call), and how it ended,
        in words. A fatal signal is charged to the tracker in a call on the thread it hit; to
        none when that thread was in no tracker's call; to every tracker in a call only when no
        report says which thread it hit. A death from outside, or an exit, is no tracker's."""
        inside, self._inside = self._inside, {}
        report = self._crash_report()
        how = describe_exit(code)
        if code is None or code >= 0 or -code not in SELF_INFLICTED:
            return {}, how
        found = CRASHED_THREAD.search(report)
        culprits = {name: hook for name, (hook, thread) in inside.items() if found is None or thread == int(found.group(1), 16)}
        if culprits:
            calls = ", ".join(f"tracker {name!r} in its {hook} call" for name, hook in sorted(culprits.items()))
            return culprits, f"{how}, {calls}"
        fatal, frame = FATAL_ERROR.search(report), found and FRAME.match(found.group(2) or "")
        where = [f"Fatal Python error: {fatal.group(1).strip()[:120]}"] if fatal else []
        where += [f"in {frame.group(3)} ({Path(frame.group(1)).name}:{frame.group(2)})"] if frame else []
        kept = f"; its report: {self.log_path}" if self.log_path and report else ""
        return {}, f"{how}, outside any tracker call: {', '.join(where) or 'no report of where'}; no tracker is blamed{kept}"

    def _crash_report(self) -> str:
        """What the dead child said of its fatal signal: :mod:`faulthandler`'s report (then
        added to the child's log, where it stays), else what its log holds since it started (the
        interpreter writes a fatal error there itself, with :mod:`faulthandler` disabled)."""
        report = _read_and_close(self._crash_fd)
        if CRASHED_THREAD.search(report) or self.log_path is None:
            if report and self.log_path is not None:
                with contextlib.suppress(OSError), open(self.log_path, "a", encoding="utf-8") as out:
                    out.write(report)
            return report
        try:
            with open(self.log_path, "rb") as log_file:
                size = os.fstat(log_file.fileno()).st_size
                log_file.seek(max(self._log_start, size - CRASH_REPORT_MAX))
                return log_file.read().decode(errors="replace")
        except OSError:
            return report

    def _charge(self, culprits: dict[str, str], code: int | None, how: str) -> None:
        """Count the death against each tracker inside a call; leave out of the next child the
        ones that brought it down :data:`MAX_RESTARTS` times."""
        for name, hook in sorted(culprits.items()):
            self.crashes[name] += 1
            if self.crashes[name] < MAX_RESTARTS:
                log.warning(
                    "tracking-core's delivery process for %s ended (%s); starting it again "
                    "(%d of %d for tracker %r): it resumes from the journal",
                    self.serves,
                    how,
                    self.crashes[name],
                    MAX_RESTARTS,
                    name,
                )
                continue
            why = f"its client ended the delivery process {self.crashes[name]} times ({describe_exit(code)} in its {hook} call)"
            self.plan.left_out[name] = why
            self.plan.backends = [b for b in self.plan.backends if b.name != name]
            others = ", ".join(b.name for b in self.plan.backends)
            log.warning(
                "backend %r: %s; it is left out of delivery for the rest of this run%s; what it "
                "lacks stays in the journal: run `%s` (it delivers each tracker in a process of "
                "its own)",
                name,
                why,
                f" while {others} go on" if others else "",
                _sync_command(self.plan),
            )

    def _replay_waiting(self) -> None:
        """Requests the dead child did not answer go to its successor, with the time left."""
        with self._lock:
            waiting = list(self._waiting.values())
            if self._local is not None:  # answered here from now on
                self._waiting.clear()
        for pending in waiting:
            if self._local is not None:
                threading.Thread(target=self._answer_locally, args=(pending,), daemon=True).start()
            else:
                self._send(pending.request._replace(timeout=pending.left))

    def _answer_locally(self, pending: _Waiting) -> None:
        assert self._local is not None
        request, remaining = pending.request, pending.left
        if isinstance(request, Finish):
            report = self._local.finish(request.end, remaining or 0.0)
            pending.answer = Done(request.id, not report["outstanding"], report)
        else:
            pending.answer = Done(request.id, self._local.drain(request.target, remaining))
        pending.answered.set()

    # -- the Delivery interface ---------------------------------------------------------------
    def feed(self, message: Message) -> None:
        if self._local is not None:
            self._local.feed(message)
        else:
            self._send(Feed(message))

    def wake(self) -> None:
        if self._local is not None:
            self._local.wake()

    def _request(self, request: Drain | Finish) -> Done | None:
        """Send ``request`` and wait for its answer (None: none came in time)."""
        if self._done and self._local is None:
            return None  # no delivery process any more: what is left waits for sync
        timeout = request.timeout
        pending = _Waiting(request, None if timeout is None else time.monotonic() + timeout)
        if self._local is not None:
            self._answer_locally(pending)
            return pending.answer
        with self._lock:
            self._waiting[request.id] = pending
        self._send(request)
        pending.answered.wait(None if timeout is None else timeout + REPLY_GRACE)
        with self._lock:
            self._waiting.pop(request.id, None)
        return pending.answer

    def drain(self, target_n: int, timeout: float | None) -> bool:
        answer = self._request(Drain(next(_IDS), target_n, timeout))
        return answer is not None and answer.ok

    def finish(self, end_n: int, timeout: float) -> dict[str, Any]:
        # The child answers within its own bound, leaving time for the answer to arrive.
        answer = self._request(Finish(next(_IDS), end_n, max(0.0, timeout - FINISH_MARGIN)))
        self._done = True
        report = answer.report if answer is not None else None
        if report is None:  # no answer in time: what the child said last, and that it is not done
            report = {**self._report, "outstanding": {"*": "no answer from the delivery process in time"}}
        self._outbox.put(None)  # close the child's stdin once everything before is sent
        if self._local is None and answer is not None and self._closed.wait(FINISH_MARGIN):
            _drop_if_empty(self.log_path)  # else it ends by itself; nothing of ours waits for it
        # This side's own counters, for the finish summary.
        return {**report, "dropped": self.dropped, "restarts": self.restarts}

    def forget(self) -> None:
        """In a forked child: this process is not the delivery process's parent; say nothing."""
        self._done = True
        if self._local is not None:
            self._local.forget()

    def report(self) -> dict[str, Any]:
        if self._local is not None:
            return self._local.report()
        return self._report


def _sync_command(plan: Plan) -> str:
    """The command that delivers what this writer's journal keeps."""
    return sync_command(plan.folder or "<tracking dir>")


def log_path(plan: Plan) -> Path | None:
    """Where a delivery process's output goes: ``delivery-<label>.log`` in the run's folder,
    beside its handle and configs (not in the journal, which goes when it is delivered)."""
    if not plan.handle_file:
        return None
    label = Path(plan.folder).name if plan.folder else "primary"
    if not plan.folder and plan.backends:
        label = str(plan.backends[0].context.get("label") or label)
    return Path(plan.handle_file).parent / f"delivery-{label}.log"


def _open_log(plan: Plan) -> tuple[int | None, Path | None]:
    """The delivery process's log, open for appending (a restarted process adds to it); in
    ``$TMPDIR`` when the run's folder cannot be written; (None, None): nowhere (its output is
    then lost, its log records still reach this process)."""
    path = log_path(plan)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644), path
        except OSError:
            pass
    try:
        fd, name = tempfile.mkstemp(prefix="tracking-core-delivery-", suffix=".log")
    except OSError:
        return None, None
    return fd, Path(name)


def _drop_if_empty(path: Path | None) -> None:
    """An empty log says nothing: it is not left behind."""
    if path is None:
        return
    with contextlib.suppress(OSError):
        if path.stat().st_size == 0:
            path.unlink()


def _reap_if_ours(pid: int | None) -> None:
    """Reap the keeper if it became this process's child (this process is PID 1 of a container
    or a subreaper, which inherit orphans); init reaps it everywhere else (``waitpid`` refuses
    a process that is not this one's child)."""
    if pid is None:
        return
    deadline = time.monotonic() + 1.0
    with contextlib.suppress(ChildProcessError):
        while not os.waitpid(pid, os.WNOHANG)[0] and time.monotonic() <= deadline:
            time.sleep(0.01)


def _own_pidfd() -> int | None:
    """A pidfd of this process, for the delivery process to know when it is gone without
    mistaking another process that later gets its pid; None where the kernel (Linux before 5.3)
    or the platform has none: the delivery process then watches the pid."""
    try:
        return os.pidfd_open(os.getpid())
    except (AttributeError, OSError):
        return None


def _crash_report_file() -> int | None:
    """An anonymous temporary file for the child's fatal-signal report (None if none can be
    made: a crash is then charged to every tracker inside a call)."""
    try:
        fd, path = tempfile.mkstemp(prefix="tracking-core-crash-")
    except OSError:
        return None
    with contextlib.suppress(OSError):
        os.unlink(path)
    return fd


def _read_and_close(fd: int | None) -> str:
    """The child's fatal-signal report in ``fd`` (which is closed); empty when there is none."""
    if fd is None:
        return ""
    try:
        return os.pread(fd, CRASH_REPORT_MAX, 0).decode(errors="replace")
    except OSError:
        return ""
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def describe_exit(code: int | None) -> str:
    """How a child process ended, in words."""
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
