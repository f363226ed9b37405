"""The ``console`` backend: the run's progress on stderr, with no dependency.

A compact view of the latest metrics of each role (one line per role: its steps, its most recent
values, how many it logged), written at most every few seconds (``--console-interval`` /
``$TRACKING_CORE_CONSOLE_INTERVAL``, default 5 s) and only when something changed, then a finish
summary. It never makes the training loop wait on the terminal, nor a run's finish wait more than
a second on a terminal that stopped reading (see :mod:`tracking_console.backend`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracking_core.plugin_api import (
    Backend,
    BackendRegistrar,
    HostParser,
    RunContext,
    RunHandle,
    Views,
    hookimpl,
)


class ConsoleViews(Views):
    def location(self, entry: Mapping[str, Any], handle: RunHandle) -> list[str]:
        """Nothing to say: its lines were on the terminal."""
        return []


def target(run: RunContext) -> dict[str, str]:
    """The console has no place of its own: its lines go to the writers' stderr."""
    return {"stream": "stderr"}


@hookimpl
def register_backends(register: BackendRegistrar) -> None:
    register(
        Backend(
            "console",
            "tracking_console.backend:ConsoleBackend",
            target="tracking_console:target",
            terminal=True,  # its lines are for the training process's stderr, not a log file
            views=ConsoleViews(),
            description="the latest metrics of each role on stderr, every few seconds (no dependency)",
        )
    )


@hookimpl
def add_options(parser: HostParser) -> None:
    parser.add_argument(
        "--console-interval",
        default=None,
        type=float,
        help=(
            "Seconds between two views of the console backend (at most one line per role each "
            "time). Default: $TRACKING_CORE_CONSOLE_INTERVAL, else 5."
        ),
    )
