"""``tracking-core demo``: the command the slime adapter adds to ``tracking-core``.

Registered through the ``register_commands`` hook (entry point ``slime`` of the ``tracking_core``
group). Importing this module imports nothing of the demo: its parser (its hyperparameters and
every plugin's tracking options) and its driver are imported when the command runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from tracking_core.plugin_api import hookimpl

HELP = (
    "run a slime-shaped PPO job on CPU (driver, actor and critic groups); "
    "`tracking-core demo --help` lists its options"
)


def demo_parser() -> argparse.ArgumentParser:
    """The demo's own parser (built when the command runs: it loads every plugin's options)."""
    from .demo.driver import build_parser

    return build_parser()


def run_demo(args: argparse.Namespace) -> int:
    from .demo.driver import run_demo as run

    return run(args)


@hookimpl
def register_commands(register: Any) -> None:
    register("demo", run_demo, help=HELP, parser=demo_parser)
