"""The same failure said once per process, then in one short line, then counted.

A tracker that cannot be reached fails in every hook that calls it (``open_run``,
``log_config``, ``publish_writer``, ``close_run``...), each with the same long error. Each
backend worker already reports a kind of failure (a hook and an exception type) once and then
only counts it (:class:`~tracking_core.delivery.worker.FailureLog`); across hooks, and across the
delivery processes whose log records reach one process, the **cause** decides: the first report
of a cause is said in full, every later one as one short line with the hook's name, and a
finishing primary lists each cause with how often and in which hooks (sorted by name) it was
reported (:func:`reported`). The filter sits on the ``tracking_core.delivery`` logger, so it judges the
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
from collections import Counter
from collections.abc import Mapping
from typing import Any

__all__ = ["FAILURE", "cause_of", "reported"]

#: The attribute of a log record that carries a failure's backend, hook and cause.
FAILURE = "tc_failure"
MAX_CAUSE = 160

_ERRNO = re.compile(r"\[Errno (-?\d+)\] ([^'\"()\[\]\n]+)")
_HOST_PORT = re.compile(r"host='([^']+)', port=(\d+)")
_URL = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s'\"?#]+)[^\s'\"]*")
_HEX_ID = re.compile(r"\b(?=[0-9a-f-]*\d)(?=[0-9a-f-]*[a-f])[0-9a-f]{8,}(?:-[0-9a-f]{4,})*\b")

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


class Collapse(logging.Filter):
    """Says a failure's cause in full once; later reports of it become one short line."""

    def filter(self, record: logging.LogRecord) -> bool:
        info = getattr(record, FAILURE, None)
        if not isinstance(info, dict):
            return True
        backend, hook, cause = str(info.get("backend")), str(info.get("hook")), str(info.get("cause"))
        with _lock:
            hooks = _seen.get((backend, cause))
            first = hooks is None
            _seen.setdefault((backend, cause), Counter())[hook] += 1
        if not first and not info.get("short"):
            record.msg = "backend %r failed in %s: %s, as reported above"
            record.args = (backend, hook, cause)
            setattr(record, FAILURE, {**info, "short": True})
        return True


def reported() -> list[str]:
    """Each failure cause reported in this process, with how often and in which hooks."""
    with _lock:
        items = [(key, Counter(hooks)) for key, hooks in _seen.items()]
    lines = []
    for (backend, cause), hooks in items:
        where = ", ".join(sorted(hooks))  # reports arrive from several processes in any order
        lines.append(f"{backend} failed: {cause} (reported {sum(hooks.values())}x: {where})")
    return lines


def forget() -> None:
    """Start counting afresh (a new run in a process that had one)."""
    with _lock:
        _seen.clear()


def extra_of(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``extra`` a forwarded log record carries (None when it is no failure)."""
    info = event.get("failure")
    return {FAILURE: info} if isinstance(info, dict) else None


_delivery_log = logging.getLogger("tracking_core.delivery")
if not any(isinstance(f, Collapse) for f in _delivery_log.filters):
    _delivery_log.addFilter(Collapse())
