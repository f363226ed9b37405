"""What a tracker says about its runs: the :class:`Views` a backend registers, and its answers.

A plugin gives each backend it offers one views object (``Backend(..., views=AcmeViews())``) and
the core asks it directly, about that backend's runs only: where a run's data is (the run's start
line), how to upload what is kept only on this machine (the end of the run), the viewer
``tracking-core ui`` starts, what ``tracking-core show`` reads back, a run of the tracker's own
files that has no saved handle, and the options a host's project name sets. Every method has a
default that says nothing, so a tracker's views define only what it has.

Commands in these answers are printed so that they run as printed from any directory: a tool
that is not on ``PATH`` (the project's virtual environment not activated) is named by its full
path (:func:`runnable`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .handle import RunHandle


TOOL = "tracking-core"


def command(*args: str | os.PathLike[str]) -> str:
    """``tracking-core ARGS`` as a command line that runs as printed: the bare name when ``PATH``
    finds the console script installed beside this Python, its full path when it does not,
    ``<python> -m tracking_core`` when there is none (a source checkout on ``PYTHONPATH``)."""
    if (Path(sys.executable).parent / TOOL).exists():
        head = [runnable(TOOL)]
    else:
        head = [sys.executable, "-m", "tracking_core"]
    return shlex.join([*head, *map(str, args)])


def sync_command(path: str | os.PathLike[str], timeout: float | None = None) -> str:
    """The ``tracking-core sync`` command that delivers what is kept under ``path``."""
    extra = ["--timeout", f"{timeout:g}"] if timeout is not None else []
    return command("sync", *extra, path)


def runnable(tool: str) -> str:
    """``tool`` as a command that runs from any directory: the bare name when ``PATH`` finds the
    one installed beside this Python, else the full path of that one (the virtual environment
    need not be activated), else the bare name."""
    beside = Path(sys.executable).parent / tool
    if not beside.exists():
        return tool
    found = shutil.which(tool)
    if found and Path(found).resolve() == beside.resolve():
        return tool
    return str(beside)


@dataclass
class Viewer:
    """One tracker's viewer (:meth:`Views.viewer`): ``command`` is what to start (None: nothing to
    start here, the ``url`` or ``note`` says where to look), with ``env`` added to the
    environment; ``url`` is what to open, ``ready`` the URL that answers once it is up; ``note``
    says what it is (``<tracker> UI on <store>``); ``warning`` is said on stderr before it starts
    (what the plugin could not find, and what it opens instead)."""

    tracker: str
    url: str | None = None
    command: list[str] | None = None
    ready: str | None = None
    note: str = ""
    env: dict[str, str] = field(default_factory=dict)
    warning: str = ""


@dataclass
class TrackerReport:
    """What one tracker holds of the run (:meth:`Views.read`): ``where`` its data is, the run's
    ``status`` there, a line of ``detail``; ``last`` maps a series to its last ``(value, step)``
    (``step`` None where the tracker keeps no step with the value); ``held`` maps each other kind
    of record the tracker holds (``tables``, ``histograms``, ``texts``, ``artifacts``, as the
    tracker names them) to its names and how many records of each it holds; ``error`` says why
    the tracker could not be read, when it could not."""

    tracker: str
    where: str
    status: str | None = None
    detail: str = ""
    last: dict[str, tuple[float, int | None]] = field(default_factory=dict)
    held: dict[str, dict[str, int]] = field(default_factory=dict)
    error: str | None = None

    def count(self, kind: str, name: str, n: int = 1) -> None:
        """Count ``n`` records of ``kind`` named ``name``."""
        names = self.held.setdefault(kind, {})
        names[name] = names.get(name, 0) + n


class Views:
    """What the core says about one backend's runs, asked of the backend's own views object.

    ``entry`` is the backend's entry of the run handle (its target, or what ``open_run``
    returned) and ``handle`` the whole handle. Subclass it and define what the tracker has; what
    is not defined says nothing (the core then shows the entry, or skips the line). A method
    that raises costs its own answer only: it is said in its place.
    """

    def location(self, entry: Mapping[str, Any], handle: RunHandle) -> Sequence[str] | None:
        """Where the run's data is and the command that shows it, one line each: said under the
        run's start line and after the demo's run. ``[]`` says nothing (a backend whose output was
        on the terminal); None: the entry itself is shown."""

    def sync(self, entry: Mapping[str, Any], handle: RunHandle) -> Sequence[str] | None:
        """How to upload the run's data that is kept only on this machine (an offline run), one
        line each, said under the summary at the end of the run; None where nothing waits."""

    def viewer(
        self, entry: Mapping[str, Any], handle: RunHandle, host: str, port: int | None, dry_run: bool
    ) -> Viewer | None:
        """What ``tracking-core ui`` starts to look at the run: a :class:`Viewer` with the command,
        the URL to open and the URL that answers once it is up; or one without a command whose
        ``url`` or ``note`` says where to look (a tracking server's own UI, an offline run to
        upload first). ``port`` is a free port on ``host`` for a backend that declares
        ``viewer_port`` (``--<backend>-port`` picks another), else None. ``dry_run``: the command
        is only printed, so find nothing that needs the tracker's library or server."""

    def read(self, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport | None:
        """The run read back with the tracker's own reader, for ``tracking-core show``: where it
        is, its status, the last value of each series and, by name, the other kinds of records it
        holds (``report.count(kind, name)``). Raise when it cannot be read: the error is said on
        the backend's line (an ImportError with the command that installs the backend's extra)
        and the other backends are still read. Called in a thread of its own."""

    def show_files(self, run: str, tracking_dir: str, limit: int) -> Sequence[str] | None:
        """The lines ``tracking-core show RUN`` prints of a run of this tracker's own files that
        has no saved handle, when ``run`` (a directory, or a run id under ``tracking_dir``) names
        one; else None. ``limit``: the most keys or series shown of each section."""

    def project_options(self, project: str) -> Mapping[str, Any] | None:
        """The backend options that put a host's runs in its project ``project`` (Accelerate's
        ``init_trackers(project_name)``, verl's ``project_name``): ``{"mlflow_experiment":
        project}``. Leave out an option the tracker's own environment variable already sets
        (``WANDB_PROJECT``): that variable wins. Options the host passes itself win over these."""
