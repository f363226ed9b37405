"""How runs end when the process does: normal exit, uncaught exception, SIGTERM.

* **Normal exit without ``finish()``** (slime's training actors never call it): an exit hook
  finishes every open run, draining within ``$TRACKING_CORE_EXIT_TIMEOUT`` seconds (default 30);
  what a dead tracker did not take stays in the journal for ``tracking-core sync``.
* **Uncaught exception**: the primary's run ends FAILED.
* **SIGTERM**: every open run is finished with status KILLED, then the handler that was installed
  before ours runs (or the default action: the process ends with SIGTERM).
* **SIGKILL**: nothing runs here; the journal holds everything logged up to the last flush
  interval (0.5 s by default). The delivery process (:mod:`tracking_core.delivery.process`)
  notices, delivers it within the exit timeout and closes the run as KILLED; what is left,
  ``tracking-core sync`` delivers.
* **fork**: a child process inherits the parent's runs but not their threads; in the child they
  become inert (each call warns once and does nothing, the exit hook skips them), so a forked
  child never closes its parent's run nor writes into its journal. It attaches to log.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from typing import Any, Protocol

from .records import RunStatus


class Run(Protocol):
    """What the exit hooks need of an open run (:class:`tracking_core.runs.Run`)."""

    primary: bool
    exit_timeout: float

    @property
    def run_id(self) -> str: ...

    def finish(self, timeout: float = ..., status: Any = ...) -> Any: ...

    def forked(self) -> None: ...

log = logging.getLogger("tracking_core.lifecycle")


#: Strong references: a run dropped by its caller (slime's actors keep none) must still be
#: finished at exit, not garbage-collected with its records.
_open_runs: set[Run] = set()
_failing = False
_installed = False
_previous_sigterm: Any = None


def default_status() -> RunStatus:
    return RunStatus.FAILED if _failing else RunStatus.FINISHED


def register(run: Run) -> None:
    _install()
    _open_runs.add(run)


def unregister(run: Run) -> None:
    _open_runs.discard(run)


def primary_open(run_id: str) -> bool:
    """Whether the primary of run ``run_id`` is open (not finished yet) in this process."""
    return any(run.primary and run.run_id == run_id for run in list(_open_runs))


def finish_all(status: RunStatus | None = None) -> None:
    for run in list(_open_runs):
        try:
            run.finish(timeout=run.exit_timeout, status=status)
        except Exception:  # noqa: BLE001 - never fail an exiting process
            log.exception("tracking-core could not finish run %s", run.run_id)


def exit_hook_last() -> None:
    """Move our exit hook to run first (exit hooks run last-registered first): trackers such as
    wandb register their own teardown when a run opens, and ours must drain before it."""
    if _installed:
        atexit.unregister(finish_all)
        atexit.register(finish_all)


def _excepthook(exc_type: Any, exc: Any, tb: Any) -> None:
    global _failing
    if not issubclass(exc_type, KeyboardInterrupt):
        _failing = True
    _previous_excepthook(exc_type, exc, tb)


def _on_sigterm(signum: int, frame: Any) -> None:
    finish_all(RunStatus.KILLED)
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


_previous_excepthook = sys.excepthook


def _after_fork() -> None:
    for run in list(_open_runs):
        run.forked()
    _open_runs.clear()


def _install() -> None:
    """Install the exit hook, the excepthook, the SIGTERM handler and the fork hook, once per
    process."""
    global _installed, _previous_sigterm
    if _installed:
        return
    _installed = True
    atexit.register(finish_all)
    os.register_at_fork(after_in_child=_after_fork)
    sys.excepthook = _excepthook
    if threading.current_thread() is threading.main_thread():
        try:
            _previous_sigterm = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError):  # an embedded interpreter without signal support
            _previous_sigterm = None
