"""The status a primary closes the run with in one backend.

Before it closes, a primary learns from the backend's writer registry (see :mod:`.writers`)
which of the job's writers still owe data, waiting for them while the follower's finish allows,
and closes FAILED instead of the status it meant while any does. A secondary only detaches.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..attendance import await_writers
from ..records import RunStatus
from .writers import Registration

log = logging.getLogger("tracking_core.delivery")

#: How long the verdict waits for the follower to say when it finishes (it may do so just after
#: the end arrives).
CLOSING_PATIENCE = 3.0


class CloseVerdict:
    """Judged once (a retried close keeps it); ``stop`` ends the wait early."""

    def __init__(self, registration: Registration, stop: threading.Event) -> None:
        self.registration = registration
        self.stop = stop
        self.closing = threading.Event()  # the follower finishes: ``writers_until`` is set
        self.writers_until = 0.0
        self.status: RunStatus | None = None
        #: writers of the job that still owed data when this primary closed the run here
        self.owing: dict[str, dict[str, Any]] = {}

    def close_by(self, writers_until: float) -> None:
        """The follower finishes: wait for the job's other writers until ``writers_until``
        (monotonic) at most."""
        self.writers_until = writers_until
        self.closing.set()

    def judge(self, meant: RunStatus, since: float) -> RunStatus:
        """The status to close with, ``meant`` unless a writer owes data; ``since``: when this
        primary began to close (epoch seconds). The wait is for a run meant to be FINISHED only."""
        if self.status is not None:
            return self.status
        slot = self.registration.slot
        if slot.implements("read_writers"):
            self.closing.wait(CLOSING_PATIENCE)
            context = slot.context
            try:
                self.owing = await_writers(  # the registry's, and the writers the job's store announced
                    self.registration.read,
                    run_id=context.run_id,
                    own=self.registration.own,
                    tracking_dir=context.tracking_dir,
                    since=since,
                    until=self.writers_until if meant is RunStatus.FINISHED else 0.0,
                    stop=self.stop,
                )
            except Exception:  # noqa: BLE001 - the registry never keeps a run from closing
                log.exception("tracking-core could not judge the writers of run %s in %r", context.run_id, slot.spec.name)
        failed = bool(self.owing) and meant is RunStatus.FINISHED
        self.status = RunStatus.FAILED if failed else meant
        return self.status
