"""``add_options`` runs under the same per-plugin guard as every other hook.

A plugin whose ``add_options`` raises is reported by name (a warning, and its error in
``tracking-core plugins``) and left out whole: the options it added before raising are taken
back off the host's parser. tracking-core's own options and the other plugins' are added, and
the host's parser works (``parse_args``, ``--help``).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from typing import Any

import pytest

import tracking_core
from tracking_core.options import tracking_option_dests
from tracking_core.plugin_api import HostParser, hookimpl
from tracking_core.plugins import get_plugin_manager, reset_plugin_manager


class Raising:
    """Adds one option, then raises: as a plugin with a typo in its second add_argument would."""

    @hookimpl
    def add_options(self, parser: HostParser) -> None:
        parser.add_argument("--raising-before", default="x", help="added before the failure")
        raise RuntimeError("boom in add_options")


class Fine:
    @hookimpl
    def add_options(self, parser: HostParser) -> None:
        parser.add_argument("--fine-depth", type=int, default=3)


@pytest.fixture
def manager() -> Iterator[Any]:
    reset_plugin_manager()
    manager = get_plugin_manager()
    manager.register(Raising(), "raising-options")
    manager.register(Fine(), "fine-options")
    try:
        yield manager
    finally:
        reset_plugin_manager()


def test_a_raising_add_options_is_left_out_and_the_parser_works(
    manager: Any, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser(prog="train.py")
    parser.add_argument("--lr", type=float, default=1e-3)  # the host's own
    with caplog.at_level(logging.WARNING, logger="tracking_core.plugins"):
        host = tracking_core.add_tracking_options(parser)
    # reported by name, with what it raised and what was taken back
    (record,) = [r for r in caplog.records if "raising-options" in r.getMessage()]
    message = record.getMessage()
    assert "left out of the command-line options" in message
    assert "RuntimeError: boom in add_options" in message and "--raising-before" in message
    assert "add_options raised RuntimeError" in (manager.plugins["raising-options"].error or "")
    # left out whole; everything else is there
    assert "--raising-before" not in parser._option_string_actions
    assert "--raising-before" not in host.added and "--fine-depth" in host.added
    args = parser.parse_args(["--fine-depth", "5", "--tracking-backends", "jsonl", "--lr", "0.1"])
    assert (args.fine_depth, args.tracking_backends, args.lr) == (5, "jsonl", 0.1)
    assert not hasattr(args, "raising_before")
    with pytest.raises(SystemExit):
        parser.parse_args(["--raising-before", "y"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    help_text = capsys.readouterr().out
    assert "--fine-depth" in help_text and "--tracking-backends" in help_text
    assert "--raising-before" not in help_text
    # the plumbing set agrees with the parser
    dests = tracking_option_dests()
    assert "fine_depth" in dests and "tracking_backends" in dests and "raising_before" not in dests


def test_on_an_argument_group_and_said_once(manager: Any, caplog: pytest.LogCaptureFixture) -> None:
    parser = argparse.ArgumentParser(prog="train.py")
    group = parser.add_argument_group("tracking")
    with caplog.at_level(logging.WARNING, logger="tracking_core.plugins"):
        tracking_core.add_tracking_options(group)
        tracking_core.add_tracking_options(argparse.ArgumentParser())  # a second parser
        tracking_option_dests()
    assert sum("raising-options" in r.getMessage() for r in caplog.records) == 1
    assert "--raising-before" not in parser._option_string_actions
    assert all(a.dest != "raising_before" for a in group._group_actions)
    assert parser.parse_args(["--fine-depth", "7"]).fine_depth == 7
    assert "--raising-before" not in parser.format_help()


def test_plugins_command_shows_the_error(manager: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from tracking_core import cli

    tracking_core.add_tracking_options(argparse.ArgumentParser())
    assert cli.main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "raising-options" in out and "add_options raised RuntimeError: boom in add_options" in out
