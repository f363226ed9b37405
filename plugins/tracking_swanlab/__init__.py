"""The ``swanlab`` backend: one SwanLab experiment per job, every role writing into it.

SwanLab keeps one run per process and one run directory per run; several runs can share one run
id (``parallel="shared"``). So every writing process opens its own SwanLab run under the job's id:
in **cloud** mode they all write the one experiment on the server; in **offline** / **local**
mode each writer has its own run directory (``run-<time>-<id>-<label>`` under the log dir), one
experiment once each is uploaded with ``swanlab sync --id <id> DIR`` (the primary's last: its
config holds every role's keys). Offline is the default when no API key is found.

Importing this package does not import ``swanlab``: only selecting the backend does
(:mod:`tracking_swanlab.backend`). See :mod:`tracking_swanlab.options` for the options and the
environment variables each falls back to, and :func:`tracking_swanlab.options.target`, where the
experiment goes, decided when the run starts.
"""

from __future__ import annotations

from tracking_core.plugin_api import Backend, BackendRegistrar, HostParser, hookimpl

from .options import add_options as _add_options
from .views import SwanlabViews


@hookimpl
def register_backends(register: BackendRegistrar) -> None:
    register(
        Backend(
            "swanlab",
            "tracking_swanlab.backend:SwanlabBackend",
            target="tracking_swanlab.options:target",
            requires=("swanlab",),
            extra="swanlab",
            description="SwanLab: cloud (one experiment) or offline/local run directories",
            views=SwanlabViews(),
        )
    )


@hookimpl
def add_options(parser: HostParser) -> None:
    _add_options(parser)
