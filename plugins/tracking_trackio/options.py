"""What the ``trackio`` backend needs to know, from the host's options and trackio's variables.

Pure functions, no ``trackio`` import (it takes ~1.3 s and fixes its data directory when it is
imported): listing plugins, adding options and computing the target stay cheap.

==============  ===========================  ==================================================
setting         option (dest)                environment / default
==============  ===========================  ==================================================
project         ``--trackio-project``        ``TRACKIO_PROJECT``; ``tracking-core``
run name        ``--trackio-run-name``       ``TRACKIO_RUN_NAME``; the job's run name
group           ``--trackio-group``          ``TRACKIO_GROUP``; none
data directory  ``--trackio-dir``            ``TRACKIO_DIR`` (trackio's own); else
                                             ``<tracking-dir>/trackio``
==============  ===========================  ==================================================

The data directory holds trackio's store: one SQLite database per project
(``<dir>/<project>.db``). Open it with ``TRACKIO_DIR=<dir> trackio show --project <project>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracking_core.plugin_api import HostParser, RunContext

DEFAULT_PROJECT = "tracking-core"
#: trackio keeps only these characters of a project name for its files.
_PROJECT_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def add_options(parser: HostParser) -> None:
    """Declare the trackio options; the parser skips those the host already defines."""
    parser.add_argument(
        "--trackio-project",
        default=None,
        help="trackio project. Default: $TRACKIO_PROJECT, else 'tracking-core'.",
    )
    parser.add_argument(
        "--trackio-run-name",
        default=None,
        help="trackio run name. Default: $TRACKIO_RUN_NAME, else the job's run name.",
    )
    parser.add_argument(
        "--trackio-group",
        default=None,
        help="trackio run group. Default: $TRACKIO_GROUP.",
    )
    parser.add_argument(
        "--trackio-dir",
        default=None,
        help="trackio's data directory (one SQLite file per project). Default: $TRACKIO_DIR, else <tracking-dir>/trackio.",
    )


def _first(run: RunContext, dest: str, env: str) -> Any:
    value = run.option(dest, env)
    return value if value not in (None, "") else None


def project_file(project: str) -> str:
    """The file name trackio gives a project's database (``my.model`` -> ``mymodel.db``)."""
    return (_PROJECT_CHARS.sub("", project).rstrip() or "default") + ".db"


def target(run: RunContext) -> dict[str, Any]:
    """Where the job's trackio run goes, decided once when the run starts (no ``trackio``
    import): ``{project, run, run_id, group, dir}``. ``run_id`` is the job's run id, so every
    writer (and ``tracking-core sync``) writes the same trackio run."""
    directory = _first(run, "trackio_dir", "TRACKIO_DIR")
    return {
        "project": str(_first(run, "trackio_project", "TRACKIO_PROJECT") or DEFAULT_PROJECT),
        "run": str(_first(run, "trackio_run_name", "TRACKIO_RUN_NAME") or run.name),
        "run_id": str(run.run_id),
        "group": _first(run, "trackio_group", "TRACKIO_GROUP"),
        "dir": str(
            Path(directory).expanduser().absolute()
            if directory
            else (Path(run.tracking_dir) / "trackio").absolute()
        ),
    }


def show_command(entry: Mapping[str, Any]) -> str:
    """The command that opens trackio's dashboard on the run's project."""
    from tracking_core.plugin_api import runnable

    return f"TRACKIO_DIR={entry['dir']} {runnable('trackio')} show --project {entry['project']}"
