"""``tracking-core sync`` delivers each tracker of a journal in a process of its own.

A tracker whose client kills its process (a segfault or ``abort()`` in a C extension) or never
returns from a call then costs only itself. The sync holds the journal's ``follower.lock`` and
hands it down; it starts one delivery process (:mod:`.process`, with a ``replay`` plan) per
backend, all at once, and alone writes the journal's ``acks.json`` from the progress they report.
Each process delivers to the journal's end within the time the sync has left and exits; one still
running at the deadline is killed. The one completion rule is then applied over every backend of
the journal: it is removed only when all of them have everything.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from .client import describe_exit
from .follower import end_of, retire
from .journal import Acks
from .messages import Call, Done, Event, Log, Opened, Progressed, Replay, Start, decode_event, line
from .plan import Plan
from .progress import BackendProgress, Progress

log = logging.getLogger("tracking_core.sync")

#: What a reader puts in the queue when its process's output ends.
_ENDED = None

#: Kept of the time left for a delivery process to answer and exit after its own deadline,
#: and allowed beyond the deadline before one that did not is killed.
MARGIN = 1.0
#: Seconds between the progress lines a sync says while trackers deliver (at most).
PROGRESS_EVERY = 5.0
#: The fields of a replaying process's progress that it reports (:class:`BackendProgress`).
_PROGRESS = ("n", "delivered", "rejected", "owed", "configs")


@dataclass
class Outcome:
    """How one backend's delivery process ended."""

    name: str
    report: dict[str, Any] | None = None
    code: int | None = None
    #: the tracker call it was inside when it ended or was ended (None: none)
    inside: str | None = None
    killed_at_deadline: bool = False

    def why(self, timeout: float) -> str:
        """Why what it lacks is not delivered, in words (empty when nothing unusual happened)."""
        if self.killed_at_deadline or (self.report is not None and self.inside):
            where = f"its {self.inside} call" if self.inside else "it"
            return f"{where} had not returned after {timeout:.0f} s (sync's --timeout)"
        if self.report is None and self.inside:
            return f"its client ended the process delivering it ({describe_exit(self.code)} in its {self.inside} call)"
        if self.report is None:
            return f"the process delivering it ended without finishing ({describe_exit(self.code)}; see the errors above)"
        return ""


def replay_apart(
    plan: Plan,
    lock_fd: int,
    deadline: float,
    on_opened: Callable[[str, Any], None],
    say: Callable[[str], None] | None = None,
) -> tuple[dict[str, str], dict[str, Outcome], dict[str, BackendProgress]]:
    """Deliver the journal of ``plan`` (its lock held in ``lock_fd``) to each of its backends in
    a process of its own, by ``deadline``. ``say`` gets a line per running backend every
    :data:`PROGRESS_EVERY` seconds. Returns what is still outstanding (the journal was removed
    when nothing is), each backend's :class:`Outcome`, and the journal's progress per backend."""
    assert plan.folder is not None
    folder, names = Path(plan.folder), [b.name for b in plan.backends]
    end = end_of(folder, "KILLED")  # the writer died before journaling its end: done once, here
    acks = Acks(folder, names)
    timeout = max(0.0, deadline - time.monotonic() - MARGIN)
    events: queue.Queue[tuple[str, Event | None]] = queue.Queue()
    children = {b.name: _start(replace(plan, backends=[b], exit_timeout=timeout, replay=True), lock_fd, events) for b in plan.backends}
    outcomes = {name: Outcome(name) for name in children}
    running = set(children)
    before = {name: acks.progress[name].delivered for name in running}
    next_line = time.monotonic() + PROGRESS_EVERY
    while running:
        now = time.monotonic()
        if say is not None and now >= next_line:
            for name in sorted(running):
                say(_progress_line(folder, name, acks.progress[name].delivered - before[name], outcomes[name].inside))
            next_line = now + PROGRESS_EVERY
        wait = deadline + MARGIN - now
        if wait <= 0:
            break
        try:
            name, event = events.get(timeout=min(wait, max(0.0, next_line - now)))
        except queue.Empty:
            if time.monotonic() < deadline + MARGIN:
                continue
            break
        if event is _ENDED:
            running.discard(name)
            outcomes[name].code = _exit_code(children[name])
            continue
        _on_event(name, event, acks, outcomes[name], on_opened)
    for name in running:  # past the deadline: a call that never returns costs only its tracker
        outcomes[name].killed_at_deadline = True
        with contextlib.suppress(ProcessLookupError):
            children[name].kill()
        outcomes[name].code = _exit_code(children[name])
    acks.save()
    missing = Progress(acks.progress, names).outstanding(end)
    if not missing:
        retire(folder)
    return missing, outcomes, dict(acks.progress)


def _progress_line(folder: Path, name: str, delivered: int, inside: str | None) -> str:
    """What one backend's delivery of ``folder`` is doing now, in one line."""
    doing = {"open_run": "opening the run", "attach_run": "finding the run", "close_run": "closing the run"}
    now = doing.get(inside or "", f"waiting for its {inside} call to return" if inside else "reading the journal")
    return f"{folder.name}: {name}: {delivered} values delivered so far; {now}"


def _on_event(
    name: str, event: Event | None, acks: Acks, outcome: Outcome, on_opened: Callable[[str, Any], None]
) -> None:
    if isinstance(event, Progressed):
        progress = event.acks.get(name)
        if progress is not None:
            acks.update(name, **{k: progress[k] for k in _PROGRESS if k in progress})
        acks.save()
    elif isinstance(event, Call):
        outcome.inside = event.hook
    elif isinstance(event, Done):
        outcome.report = dict(event.report or {})
    elif isinstance(event, Opened):
        on_opened(name, event.result)
    elif isinstance(event, Log):
        event.emit()


def _start(plan: Plan, lock_fd: int, events: queue.Queue[tuple[str, Event | None]]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracking_core.delivery.process"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        pass_fds=(lock_fd,),  # the lock stays held while any of them still delivers
    )
    assert proc.stdin is not None and proc.stdout is not None
    first = Start(
        plan=json.loads(plan.to_json()),
        log_level=logging.getLogger("tracking_core").getEffectiveLevel(),
        argv=["tracking-core", "sync"],
        lock_fd=lock_fd,
    )
    try:
        proc.stdin.write(line(first) + line(Replay(1, plan.exit_timeout)))
        proc.stdin.flush()  # stdin stays open: the process stops when this one is gone
    except OSError:
        pass  # it died at once: its end is read below
    threading.Thread(target=_read, args=(plan.backends[0].name, proc.stdout, events), daemon=True).start()
    return proc


def _read(name: str, stream: IO[bytes], events: queue.Queue[tuple[str, Event | None]]) -> None:
    for raw in stream:
        try:
            event = decode_event(json.loads(raw))
        except (ValueError, KeyError, TypeError):
            continue
        if event is not None:
            events.put((name, event))
    events.put((name, _ENDED))


def _exit_code(proc: subprocess.Popen[bytes]) -> int | None:
    try:
        return proc.wait(5)
    except subprocess.TimeoutExpired:
        return None
