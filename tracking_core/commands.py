"""Subcommands of ``tracking-core`` that plugins contribute (the ``register_commands`` hook).

A plugin offers a command by calling ``register(name, run, help=..., parser=...)``; the CLI adds
it beside its own commands. The command's options belong to the plugin's own parser, built by
``parser()`` only when the command runs: ``tracking-core --help`` and the other commands never
build it, so a command with many options (the demo's tracking options come from every plugin)
costs nothing until it is used. Each plugin's registrations are taken under its own guard: one
whose ``register_commands`` raises is reported by name and left out, with none of its commands,
and a name that is taken (a built-in command, or another plugin's) is refused with both names.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: What a command runs: the namespace its own parser made, to an exit status (None: 0).
CommandRun = Callable[[argparse.Namespace], "int | None"]
#: Builds the command's own parser (its options, description and ``--help``).
ParserFactory = Callable[[], argparse.ArgumentParser]


@dataclass(frozen=True)
class Command:
    """One plugin command: its name, what it runs, its one-line help, the factory of its own
    parser (None: it takes no arguments) and the plugin that registered it."""

    name: str
    run: CommandRun
    help: str
    parser: ParserFactory | None
    plugin: str


class CommandRegistrar:
    """The ``register`` callback of :func:`tracking_core.hookspecs.register_commands`: it keeps
    what one plugin registers apart until that plugin's hook has returned."""

    def __init__(self, plugin: str, owners: Mapping[str, str]) -> None:
        self.plugin = plugin
        self.owners = owners  # command name -> who has it (a plugin, or tracking-core itself)
        self.commands: dict[str, Command] = {}

    def __call__(
        self,
        name: str,
        run: CommandRun,
        *,
        help: str,
        parser: ParserFactory | None = None,
    ) -> None:
        if not name or name.startswith("-") or any(c.isspace() for c in name):
            raise ValueError(f"a command name is one word that does not start with '-', got {name!r}")
        if not callable(run) or (parser is not None and not callable(parser)):
            raise TypeError(f"command {name!r}: run and parser must be callables")
        owner = f"plugin {self.plugin!r}" if name in self.commands else self.owners.get(name)
        if owner is not None:
            raise ValueError(f"command {name!r} is taken (by {owner})")
        self.commands[name] = Command(name=name, run=run, help=help, parser=parser, plugin=self.plugin)
