"""A plugin that registers a command under a built-in command's name
(tests/core/test_commands.py), installed as the module ``taker_commands``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracking_core.plugin_api import hookimpl

if TYPE_CHECKING:
    from tracking_core.commands import CommandRegistrar


@hookimpl
def register_commands(register: CommandRegistrar) -> None:
    register("mine", lambda args: 0, help="never added: the plugin's other name is taken")
    register("show", lambda args: 0, help="a built-in command's name")
