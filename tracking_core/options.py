"""Command-line options: ours, and those plugins add to the host's parser.

Hosts such as slime and Megatron already define many tracker options (``--wandb-project``,
``--tensorboard-dir``); defining one twice is an argparse error. :class:`HostParser` wraps the
host's parser so that a plugin declares what it needs and silently reuses what already exists.

These options say where the data goes, not what the job is: :func:`tracking_option_dests` names
their destinations, so that the config pipeline keeps them out of each role's params and logs
them once, as the launch config's ``tracking/`` group.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from . import settings
from .host_parser import HostParser, added_dests

#: Our own options, with the environment variable each falls back to.
BACKENDS_ENV = settings.BACKENDS
DIR_ENV = settings.DIR
KEY_STYLE_ENV = settings.KEY_STYLE
KEY_STYLES = ("default", "slime")

def add_tracking_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    reserved: Mapping[str, str] | None = None,
) -> HostParser:
    """Add ``--tracking-backends``, ``--tracking-run-name``, ``--tracking-dir``, ``--tracking-key-style``,
    ``--tracking-delivery``, ``--tracking-system-metrics``, ``--tracking-quiet`` and every option
    the installed backend plugins ask for, skipping what the host already defines (or will
    define: ``reserved``, option string → dest)."""
    return _add_options(HostParser(parser, reserved))


def _add_options(host: HostParser) -> HostParser:
    from .plugins import get_plugin_manager

    host.add_argument(
        "--tracking-backends",
        default=None,
        help=(
            "Comma-separated trackers to log to (`tracking-core plugins` lists them). "
            f"Default: ${BACKENDS_ENV}, then the host's switches, then the default tracker."
        ),
    )
    host.add_argument(
        "--tracking-run-name",
        default=None,
        metavar="NAME",
        help="The run's name in every tracker. Default: the name the host gives it, else the run id.",
    )
    host.add_argument(
        "--tracking-dir",
        default=None,
        help=f"Where local run data goes. Default: ${DIR_ENV}, else ./{settings.DEFAULT_TRACKING_DIR}.",
    )
    host.add_argument(
        "--tracking-key-style",
        default=None,
        choices=KEY_STYLES,
        help=(
            "Config key naming: 'default' (launch config unprefixed, <role>/key per role) or "
            "'slime' (slime's own keys: actor unprefixed, critic/ prefixed)."
        ),
    )
    host.add_argument(
        "--tracking-delivery",
        default=None,
        choices=("process", "thread"),
        help=(
            "Where the trackers' client code runs: 'process' (a delivery process beside each "
            "writer, the default where possible) or 'thread' (threads of the training process). "
            "Default: $TRACKING_CORE_DELIVERY."
        ),
    )
    host.add_argument(
        "--tracking-system-metrics",
        default=None,
        nargs="?",
        const="1",
        metavar="SECONDS",
        help=(
            "Sample each node's CPU, memory, disk, network and GPUs (one process per node) into "
            "every tracker as system/<host>/... series: alone or 1 every "
            f"{settings.DEFAULT_SYSTEM_INTERVAL:g} s, a number of seconds (1.0, 2.5, 30s) that "
            f"often, 0 off. Default: ${settings.SYSTEM_METRICS}, else off."
        ),
    )
    host.add_argument(
        "--tracking-quiet",
        action="store_true",
        default=None,
        help=(
            "Do not say where the run goes when it starts, nor its summary when everything "
            f"arrived (an incomplete delivery is still said). Default: ${settings.QUIET}."
        ),
    )
    get_plugin_manager().add_options(host)
    return host


def tracking_option_dests() -> frozenset[str]:
    """The argparse destinations of the tracking options: those :func:`add_tracking_options`
    defines (tracking-core's own and every registered plugin's ``add_options``, selected or not)
    and those any :class:`HostParser` of this process added (a host adapter's own flags).

    They are plumbing, not the job's config: the config pipeline keeps them out of the params
    and logs the set ones once, as the launch config's ``tracking/`` group. Computed on a parser
    of its own, so it holds in a process that never saw the host's parser (a role's worker); a
    plugin whose ``add_options`` raises is left out here as on the host's parser.
    """
    scratch = argparse.ArgumentParser(add_help=False)
    try:
        _add_options(HostParser(scratch, record=False))
    except Exception:  # noqa: BLE001 - a broken plugin's options: the rest still count
        pass
    return frozenset(added_dests() | {action.dest for action in scratch._actions})


def tracking_dir(args: Any = None, explicit: str | os.PathLike[str] | None = None) -> str:
    """The tracking directory: explicit value, ``--tracking-dir``, ``$TRACKING_CORE_DIR``, default."""
    return tracking_dir_source(args, explicit)[0]


def tracking_dir_source(args: Any = None, explicit: str | os.PathLike[str] | None = None) -> tuple[str, str]:
    """:func:`tracking_dir` and what chose it (``tracking_dir=``, ``--tracking-dir``,
    ``$TRACKING_CORE_DIR`` or ``the default``), for messages that say what to change."""
    for value, source in (
        (explicit, "tracking_dir="),
        (getattr(args, "tracking_dir", None), "--tracking-dir"),
        (settings.get(DIR_ENV), f"${DIR_ENV}"),
    ):
        if value:
            return os.fspath(value), source
    return settings.DEFAULT_TRACKING_DIR, "the default"


def system_metrics_interval(args: Any = None) -> float | None:
    """Seconds between the node's system samples, or None when off: ``--tracking-system-metrics``
    (``args.tracking_system_metrics``), else ``$TRACKING_CORE_SYSTEM_METRICS``, else off
    (:func:`tracking_core.settings.system_interval` reads each)."""
    option = getattr(args, "tracking_system_metrics", None)
    seconds = settings.system_interval(None if option is None else str(option), "--tracking-system-metrics")
    if seconds is None:
        seconds = settings.system_interval(settings.get(settings.SYSTEM_METRICS), f"${settings.SYSTEM_METRICS}")
    return seconds or None


def key_style(args: Any = None, explicit: str | None = None) -> str:
    """The config key style: explicit value, ``--tracking-key-style``, env var, ``default``."""
    for value in (
        explicit,
        getattr(args, "tracking_key_style", None),
        settings.get(KEY_STYLE_ENV),
    ):
        if value:
            if value not in KEY_STYLES:
                raise ValueError(
                    f"unknown tracking key style {value!r}: choose one of {', '.join(KEY_STYLES)} "
                    f"(--tracking-key-style or ${KEY_STYLE_ENV})"
                )
            return value
    return "default"
