"""The host's parser as plugins see it: options added where the host has none, reused where it has.

Hosts such as slime and Megatron already define many tracker options (``--wandb-project``,
``--tensorboard-dir``); defining one twice is an argparse error. :class:`HostParser` wraps the
host's parser so that a plugin declares what it needs and silently reuses what already exists.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Mapping
from typing import Any

#: Destinations of the options a :class:`HostParser` of this process added (tracking-core's own,
#: its plugins', a host adapter's), whatever parser they went to.
_ADDED_DESTS: set[str] = set()
_ADDED_LOCK = threading.Lock()


class HostParser:
    """A view of the host's parser (or argument group) that skips options it already has.

    ``reserved`` maps option strings the host will add *later* to their ``dest`` (slime adds its
    ``--wandb-*`` flags after calling its extra-arguments providers): they count as defined.
    Every option added through it counts as a tracking option (:func:`~tracking_core.options.tracking_option_dests`)
    unless ``record`` is false.
    """

    def __init__(
        self,
        parser: argparse.ArgumentParser | argparse._ArgumentGroup,
        reserved: Mapping[str, str] | None = None,
        *,
        record: bool = True,
    ) -> None:
        self._parser = parser
        self.reserved = dict(reserved or {})
        self._record = record
        self.added: list[str] = []
        self._actions: list[argparse.Action] = []
        self.reused: list[str] = []

    def has_option(self, option: str) -> bool:
        """Whether the host defines ``option`` (``"--wandb-project"``), now or later."""
        return option in self.reserved or option in self._parser._option_string_actions

    def _has_dest(self, dest: str) -> bool:
        return dest in self.reserved.values() or any(
            action.dest == dest
            for action in self._parser._actions
        )

    def add_argument(self, *flags: str, **kwargs: Any) -> argparse.Action | None:
        """Add the option unless any of its flags exists already; returns the action or None.

        A flag the host defines is reused as it is (its ``dest`` and default are the host's).
        """
        existing = [flag for flag in flags if self.has_option(flag)]
        if existing:
            self.reused.extend(existing)
            return None
        dest = kwargs.get("dest") or flags[0].lstrip("-").replace("-", "_")
        if self._has_dest(dest):
            self.reused.append(flags[0])
            return None
        self.added.append(flags[0])
        action = self._parser.add_argument(*flags, **kwargs)
        self._actions.append(action)
        if self._record:
            with _ADDED_LOCK:
                _ADDED_DESTS.add(action.dest)
        return action

    def mark(self) -> int:
        """A point to :meth:`take_back` to: the number of options added through this view."""
        return len(self._actions)

    def take_back(self, mark: int) -> list[str]:
        """Remove from the parser the options added through this view since ``mark`` (a plugin
        whose ``add_options`` raised is left out whole); returns their first option strings."""
        taken, self._actions[mark:] = self._actions[mark:], []
        parser = self._parser
        for action in reversed(taken):
            parser._remove_action(action)  # from the parser's actions (and a group's own list)
            for group in parser._action_groups:  # a parser's: where --help finds it
                if action in group._group_actions:
                    group._group_actions.remove(action)
            for flag in action.option_strings:
                parser._option_string_actions.pop(flag, None)
            if self._record and not self._has_dest(action.dest):
                with _ADDED_LOCK:
                    _ADDED_DESTS.discard(action.dest)
        first = [action.option_strings[0] if action.option_strings else action.dest for action in taken]
        self.added = [flag for flag in self.added if flag not in first]
        return first


def added_dests() -> set[str]:
    """The destinations every :class:`HostParser` of this process added and recorded."""
    with _ADDED_LOCK:
        return set(_ADDED_DESTS)
