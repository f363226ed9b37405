"""``tracking-core demo``: the command the slime adapter adds to ``tracking-core``.

Registered through the ``register_commands`` hook (entry point ``slime`` of the ``tracking_core``
group). Importing this module imports nothing of the demo: its parser (its hyperparameters and
every plugin's tracking options) and its driver are imported when the command runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any

from tracking_core.plugin_api import hookimpl

#: What the demo's processes import beyond tracking-core (import name: package), all in the
#: ``demo`` extra; an install with only the trackers' extras lacks them.
DEMO_NEEDS = {"torch": "torch", "megatron.core": "megatron-core", "yaml": "PyYAML"}

HELP = (
    "run a slime-shaped PPO job on CPU (driver, actor and critic groups); "
    "`tracking-core demo --help` lists its options"
)


def demo_parser() -> argparse.ArgumentParser:
    """The demo's own parser (built when the command runs: it loads every plugin's options)."""
    from .demo.driver import build_parser

    return build_parser()


def run_demo(args: argparse.Namespace) -> int:
    missing = missing_for_demo()
    if missing:  # said before a run is opened or a rank started: one line, not a traceback per rank
        print(
            f"tracking-core demo needs {', '.join(missing)}, not installed here: run "
            'pip install "tracking-core[demo]" (the demo extra: torch, megatron-core, PyYAML; '
            "a torch you already have is kept)",
            file=sys.stderr,
        )
        return 1
    from .demo.driver import run_demo as run

    return run(args)


def missing_for_demo() -> list[str]:
    """The packages of :data:`DEMO_NEEDS` that are not installed (found without importing them)."""
    missing = []
    for module, package in DEMO_NEEDS.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package that is not there
            found = False
        if not found:
            missing.append(package)
    return missing


@hookimpl
def register_commands(register: Any) -> None:
    register("demo", run_demo, help=HELP, parser=demo_parser)
