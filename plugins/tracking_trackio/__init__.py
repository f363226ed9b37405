"""The ``trackio`` backend: one trackio run per job in trackio's local store, every role writing it.

trackio is local-first: one SQLite database per project in its data directory (``TRACKIO_DIR``,
by default ``<tracking-dir>/trackio`` here). Every writer of the job writes the one run (its id is
the job's run id): the launch config unprefixed, each role's under ``<role>/``, metrics on each
row's step, and the run's status in its config (``tracking_core/status``). Open it with
``TRACKIO_DIR=<dir> trackio show --project <project>``.

Importing this package does not import ``trackio``: only selecting the backend does
(:mod:`tracking_trackio.backend`). See :mod:`tracking_trackio.options` for the options and their
environment variables, and :func:`tracking_trackio.options.target`, where the run goes.
"""

from __future__ import annotations

from tracking_core.plugin_api import Backend, BackendRegistrar, HostParser, hookimpl

from .options import add_options as _add_options
from .views import TrackioViews


@hookimpl
def register_backends(register: BackendRegistrar) -> None:
    register(
        Backend(
            "trackio",
            "tracking_trackio.backend:TrackioBackend",
            target="tracking_trackio.options:target",
            requires=("trackio",),
            extra="trackio",
            description="trackio: local-first SQLite store, `trackio show` dashboard",
            views=TrackioViews(),
        )
    )


@hookimpl
def add_options(parser: HostParser) -> None:
    _add_options(parser)
