"""A plugin adding the command ``hello`` to tracking-core (tests/core/test_commands.py),
installed as the module ``hello_plugin``: it prints its arguments as JSON and exits 3.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from tracking_core.plugin_api import hookimpl

if TYPE_CHECKING:
    from tracking_core.commands import CommandRegistrar


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Say hello to a run.")
    p.add_argument("--name", required=True)
    p.add_argument("--tracking-dir", default=None)
    return p


def run(args: argparse.Namespace) -> int:
    print(json.dumps(vars(args)))
    return 3


@hookimpl
def register_commands(register: CommandRegistrar) -> None:
    register("hello", run, help="greet a run (a third-party command)", parser=parser)
