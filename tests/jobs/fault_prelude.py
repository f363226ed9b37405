"""What every job of the fault suite starts with (tests/faults/conftest.py): a job imports it
before tracking_core, so its exit hook runs after tracking-core's. It keeps every WARNING-or-worse
log record and Python warning the process emitted and prints them at exit as a ``WARNINGS`` line;
``report(...)`` prints a ``RESULT`` line."""

from __future__ import annotations

import atexit as _atexit
import json as _json
import logging as _logging
import os as _os
import sys as _sys  # noqa: F401 - a job's own name for it
import time as _time
from typing import Any

logging_format = "%(levelname)s %(name)s: %(message)s"
_logging.basicConfig(level=_logging.WARNING, format=logging_format)
_logging.captureWarnings(True)
WARNINGS: list[str] = []


class _Keep(_logging.Handler):
    def emit(self, record: _logging.LogRecord) -> None:
        if record.levelno >= _logging.WARNING:
            try:
                WARNINGS.append(record.getMessage())
            except Exception as exc:  # a record whose message cannot be formatted
                WARNINGS.append(f"<unformattable log record: {exc!r}>")


_logging.getLogger().addHandler(_Keep())
_MAIN_PID = _os.getpid()


@_atexit.register
def _print_warnings() -> None:
    # Registered before tracking_core is imported, so it runs after tracking-core's exit hook.
    print("WARNINGS " + _json.dumps({"pid": _os.getpid(), "warnings": WARNINGS}), flush=True)


def report(**values: Any) -> None:
    print("RESULT " + _json.dumps({"pid": _os.getpid(), **values}, default=repr), flush=True)


def summ(summary: Any) -> dict[str, Any] | None:
    """A FinishSummary as plain data (attributes the old core lacks read '<missing>')."""
    if summary is None:
        return None
    out = {}
    for name in ("drained", "logged", "skipped", "not_journaled", "journal", "backends", "spilled",
                 "spill", "late", "relieved", "lost", "bad_lines", "dropped", "restarts"):  # fmt: skip
        out[name] = getattr(summary, name, "<missing>")
    status = getattr(summary, "status", None)
    out["status"] = getattr(status, "value", str(status))
    try:
        out["describe"] = summary.describe()
    except Exception as exc:
        out["describe"] = f"<describe() raised {exc!r}>"
    return out


def delivery_pid(run: Any, timeout: float = 30.0, not_pid: int | None = None) -> int:
    """The pid of the run's delivery process: run._delivery.pid, else the process that last
    opened or attached the fault backend (waits until there is one other than ``not_pid``)."""
    deadline = _time.monotonic() + timeout
    while _time.monotonic() < deadline:
        pid = getattr(getattr(run, "_delivery", None), "pid", None)
        if pid is None:
            pid = _fault_opener()
        if pid and pid != not_pid and pid != _os.getpid():
            return int(pid)
        _time.sleep(0.02)
    raise RuntimeError(f"no delivery process other than {not_pid} within {timeout} s")


def _fault_opener() -> int | None:
    path = _os.environ.get("FAULT_OUT")
    pid = None
    if path and _os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                try:
                    obj = _json.loads(line)
                except ValueError:
                    continue
                if obj.get("ev") in ("open", "attach") and obj.get("training") == _MAIN_PID:
                    pid = obj["pid"]
    return pid


def alive(pid: int) -> bool:
    try:
        _os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
