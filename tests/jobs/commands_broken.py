"""A plugin whose register_commands raises after registering a command
(tests/core/test_commands.py), installed as the module ``broken_commands``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracking_core.plugin_api import hookimpl

if TYPE_CHECKING:
    from tracking_core.commands import CommandRegistrar


@hookimpl
def register_commands(register: CommandRegistrar) -> None:
    register("half", lambda args: 0, help="registered before the plugin raised")
    raise RuntimeError("boom in register_commands")
