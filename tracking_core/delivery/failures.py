"""The same failure said once per process, in a few words, then counted.

A tracker that cannot be reached fails in every hook that calls it (``open_run``,
``log_config``, ``publish_writer``, ``close_run``...), each with the same long error. Each
backend worker already reports a kind of failure (a hook and an exception type) once and then
only counts it (:class:`Breaker`); across hooks, and across the
delivery processes whose log records reach one process, the **cause** decides: the first report
of a cause is said, as its cause (the tracker's full text goes to the debug log); every later one
is only counted, and a finishing primary lists each cause with how often and in which hooks
(sorted by name) it was reported (:func:`reported`). The filter sits on the ``tracking_core.delivery`` logger, so it judges the
records of this process's own workers and those its delivery processes forward alike.

Two errors have the same cause when they have the same exception type and the same message once
what varies between calls is taken out: of a network error, the error itself (``[Errno 111]
Connection refused``) and where it went (host and port), not the request's path and query; of
any other, the first line, with URLs cut to scheme and host and hexadecimal ids (run ids) elided.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable

__all__ = ["FAILURE", "Breaker", "cause_of", "reported"]

#: The attribute of a log record that carries a failure's backend, hook and cause.
FAILURE = "tc_failure"
MAX_CAUSE = 160

_ERRNO = re.compile(r"\[Errno (-?\d+)\] ([^'\"()\[\]\n]+)")
_HOST_PORT = re.compile(r"host='([^']+)', port=(\d+)")
_URL = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s'\"?#]+)[^\s'\"]*")
_HEX_ID = re.compile(r"\b(?=[0-9a-f-]*\d)(?=[0-9a-f-]*[a-f])[0-9a-f]{8,}(?:-[0-9a-f]{4,})*\b")

#: Failures in a row after which a backend's circuit is open (it is probed, its records wait).
BREAKER_THRESHOLD = 3
#: The longest delay between two tries of a failing call, and between two probes.
MAX_RETRY_DELAY = 10.0

log = logging.getLogger("tracking_core.delivery")
_lock = threading.Lock()
#: (backend, cause) -> hook -> reports
_seen: dict[tuple[str, str], Counter[str]] = {}


def cause_of(exc: BaseException) -> str:
    """The failure's cause in a few words (see the module doc)."""
    kind = type(exc).__name__
    text = str(exc)
    errno = _ERRNO.search(text)
    if errno:
        where = _HOST_PORT.search(text)
        url = _URL.search(text)
        at = f"{where.group(1)}:{where.group(2)}" if where else url.group(1) if url else ""
        return f"{kind}: {errno.group(2).strip()}" + (f" ({at})" if at else "")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    first = _HEX_ID.sub("…", _URL.sub(r"\1", first))
    if len(first) > MAX_CAUSE:
        first = first[: MAX_CAUSE - 1] + "…"
    return f"{kind}: {first}" if first else kind


def failure(backend: str, hook: str, exc: BaseException) -> dict[str, dict[str, str]]:
    """The ``extra`` of a failure's log record."""
    return {FAILURE: {"backend": backend, "hook": hook, "cause": cause_of(exc)}}


class Breaker:
    """One backend's health: each kind of failure (a hook and an exception type) reported the
    first time, then counted; failures in a row (``streak``), after :data:`BREAKER_THRESHOLD` of
    which its circuit is open; since when it is down (``clock`` time), said when it is back."""

    def __init__(self, backend: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.backend = backend
        self.clock = clock
        self.counts: Counter[str] = Counter()
        self.streak = 0
        #: calls that have returned (a drain judges the tracker by them)
        self.attempts = 0
        self.down_since: float | None = None

    @property
    def open(self) -> bool:
        return self.streak >= BREAKER_THRESHOLD

    def record(self, what: str, exc: BaseException, then: str = "the call is retried") -> None:
        kind = f"{what}: {type(exc).__name__}"
        if kind not in self.counts:
            # Said as its cause, once per process whatever the hook (see the module doc).
            log.debug("backend %r failed in %s: %s", self.backend, kind, exc)
            log.warning(
                "backend %r failed in %s: %s; training goes on, %s and further failures are only counted",
                self.backend,
                what,
                cause_of(exc),
                then,
                extra=failure(self.backend, what, exc),
            )
        self.counts[kind] += 1

    def failed(self, times: int = 1) -> None:
        before = self.streak
        self.streak += times
        if before < BREAKER_THRESHOLD <= self.streak:
            self.down_since = self.clock()
            log.info(  # the failure itself was said; the end's summary counts the rest
                "backend %r failed %d times in a row: bypassed for now, probing every %.0f s at "
                "most; its records wait in the journal",
                self.backend,
                self.streak,
                MAX_RETRY_DELAY,
            )

    def succeeded(self, quietly: bool = False) -> None:
        """A call went through (``quietly``: the backend took other records than the refused)."""
        if self.down_since is not None and not quietly:
            log.warning(
                "backend %r is back after %.1f s; delivering what it missed",
                self.backend,
                self.clock() - self.down_since,
            )
        self.down_since = None
        self.streak = 0


class Collapse(logging.Filter):
    """Lets a failure's cause through once; later reports of it are only counted."""

    def filter(self, record: logging.LogRecord) -> bool:
        info = getattr(record, FAILURE, None)
        if not isinstance(info, dict):
            return True
        key = (str(info.get("backend")), str(info.get("cause")))
        with _lock:
            first = key not in _seen
            _seen.setdefault(key, Counter())[str(info.get("hook"))] += 1
        return first


def reported() -> list[str]:
    """Each failure cause reported in this process, with how often and in which hooks."""
    with _lock:  # hooks sorted: reports arrive from several processes in any order
        return [
            f"{backend} failed: {cause} (reported {sum(hooks.values())}x: {', '.join(sorted(hooks))})"
            for (backend, cause), hooks in _seen.items()
        ]


def forget() -> None:
    """Start counting afresh (a new run in a process that had one)."""
    with _lock:
        _seen.clear()


if not any(isinstance(f, Collapse) for f in log.filters):
    log.addFilter(Collapse())
