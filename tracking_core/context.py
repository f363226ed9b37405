"""What a backend knows about the run it serves."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunContext:
    """The run as one backend instance in one process sees it.

    ``run_id`` and ``name`` identify the job's run and are the same in every process;
    ``role`` is None in the primary (the driver) and names the role in a secondary;
    ``label`` is unique per writing process (``actor-r0-p1234``), for trackers that need one;
    ``pid`` is that process's id (a tracker's process monitor should watch it: the backend itself
    may run in a delivery process, see :mod:`tracking_core.delivery`).
    ``options`` holds the option values the host parsed (argparse ``dest`` → value); read them with
    :meth:`option`, which falls back to the tracker's usual environment variable.
    ``tracking_dir`` is where everything local goes (a backend keeps its files in a folder of
    its own there).
    """

    backend: str
    run_id: str
    name: str
    primary: bool
    tracking_dir: Path
    role: str | None = None
    label: str = "primary"
    rank: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    resume: bool = False
    #: The process that logs (delivery may run in a helper process: this is the training one).
    pid: int = field(default_factory=os.getpid)
    #: When the writer started and ended the run (seconds since the epoch, from its journal;
    #: None: now). ``ended_at`` is set for ``close_run`` only. A tracker that records these
    #: times takes them, not the time a call reached it: ``tracking-core sync`` may open and
    #: close a run long after its job ended.
    started_at: float | None = None
    ended_at: float | None = None

    def option(self, dest: str, env: str | None = None, default: Any = None) -> Any:
        """The host's option ``dest`` if set, else environment variable ``env``, else ``default``."""
        value = self.options.get(dest)
        if value is not None and value != "":
            return value
        if env is not None:
            value = os.environ.get(env)
            if value:
                return value
        return default
