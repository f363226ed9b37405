"""One tracker run written by several backend instances of one process, and by several processes.

A tracker that keeps one run object per process (W&B, SwanLab) cannot open the job's run twice
in a process: the primary and a role attached in the same process (the driver's actor, say) write
through the one run object. :class:`SharedRuns` is a tracker's table of such runs by run id; the
run ends when its last user closes, with the primary's status (whoever closes last).

The primary also folds into the run's config what every role saved in the job's run directory
(:func:`saved_role_sections`), so the run's config holds every role's keys whatever became of the
roles' own uploads. Pure Python: no tracker is imported here.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .context import RunContext
from .handle import run_folder
from .records import ConfigSection

log = logging.getLogger("tracking_core.backends")


@dataclass
class SharedRun:
    """A tracker run open in this process and how many backend instances write through it.

    ``status`` is the end status the primary chose (the tracker's own value), None until it
    closes; ``lock`` serialises the writers' calls on ``run``."""

    run: Any
    key: str
    users: int = 1
    status: Any = None
    lock: threading.RLock = field(default_factory=threading.RLock)


class SharedRuns:
    """One tracker's runs open in this process, by run id.

    ``lock`` (reentrant) guards the table; hold it around opening and finishing the tracker's
    runs, which is where a tracker swaps process-wide state."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._open: dict[str, SharedRun] = {}

    def join(self, key: str) -> SharedRun | None:
        """The run ``key`` if it is open in this process, with one more user; else None."""
        with self.lock:
            held = self._open.get(key)
            if held is not None:
                held.users += 1
            return held

    def add(self, run: Any, key: str) -> SharedRun:
        """Record ``run``, just opened under ``key``, with its first user."""
        with self.lock:
            shared = self._open[key] = SharedRun(run, key)
            return shared

    def leave(self, shared: SharedRun, status: Any, *, primary: bool) -> bool:
        """One user is done with ``shared`` (the primary's ``status`` is the run's). True when
        it was the last: the run is out of the table and ``shared.status`` is the status to end
        it with (the primary's, else this user's)."""
        with self.lock:
            if primary:
                shared.status = status
            shared.users -= 1
            if shared.users > 0:
                return False
            self._open.pop(shared.key, None)
            if shared.status is None:
                shared.status = status
            return True


def saved_role_sections(run: RunContext, skip: set[str], tracker: str) -> Iterator[ConfigSection]:
    """The role config sections this job saved in its run directory
    (``<tracking_dir>/runs/<run_id>/config/``), one node's or a shared file system's, except the
    namespaces in ``skip`` (those this writer logged itself) and those not logged as params. An
    unreadable file is warned about (naming ``tracker``) and passed over."""
    for path in sorted((run_folder(run.tracking_dir, run.run_id) / "config").glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            log.warning("could not read role config %s for %s (%s)", path, tracker, exc)
            continue
        if not isinstance(doc, dict) or doc.get("role") is None:
            continue
        if doc.get("namespace") in skip or not doc.get("logged_as_params", True):
            continue
        prefix = str(doc.get("prefix") or "")
        values = {str(k): v for k, v in dict(doc.get("values") or {}).items()}
        yield ConfigSection(
            role=str(doc["role"]),
            namespace=str(doc.get("namespace")),
            prefix=prefix,
            values=values,
            params={prefix + k: v for k, v in values.items()},
        )
