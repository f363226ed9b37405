"""The ``tracking-core`` command: plugins, show, diff, sync, ui, and the commands plugins add.

Each subcommand imports what it needs when it runs: :func:`build_parser` (the built-in commands)
imports no plugin, no adapter and no tracker library. Plugins add commands through the
``register_commands`` hook (:mod:`tracking_core.commands`; the slime adapter's ``demo`` is one),
asked when ``tracking-core`` starts; a plugin command's own options are parsed by its own
parser, built only when that command runs, so ``--help`` stays cheap.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from . import options as opts
from . import settings
from .errors import TrackingError

if TYPE_CHECKING:
    from .commands import Command

#: A one-line usage longer than this is said as ``usage: <prog> [options]`` in an error.
USAGE_WIDTH = 160


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose mistakes are said in three short lines: the command's usage on
    one line, the error, and where the full option list is (``--help``), instead of a usage
    message that runs over a screen (the demo's parser holds every tracker's options)."""

    def one_line_usage(self) -> str:
        formatter = argparse.HelpFormatter(prog=self.prog, width=10_000)
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        usage = " ".join(formatter.format_help().split())
        return usage if len(usage) <= USAGE_WIDTH else f"usage: {self.prog} [options]"

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.one_line_usage()}\n{self.prog}: error: {message}\nsee `{self.prog} --help`\n")


class _TwoOrMore(argparse.Action):
    """``nargs="+"`` that needs at least two values (``--roles actor critic [launch ...]``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        if len(values) < 2:
            parser.error(f"argument {option_string}: needs two or more roles to compare, got {' '.join(values)}")
        setattr(namespace, self.dest, list(values))


def _cmd_plugins(ns: argparse.Namespace) -> int:
    from .plugins import get_plugin_manager

    manager = get_plugin_manager()
    manager.backends  # noqa: B018 - fills in each plugin's backend list
    rows = [info.as_dict() for info in manager.plugins.values()]
    if ns.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no tracking_core plugins installed")
        return 0
    for row in rows:
        state = "disabled" if row["disabled"] else "FAILED" if row["error"] else "MISSING" if row["missing"] else "ok"
        print(
            f"{row['name']:<14} {row['kind'] or '-':<18} {state:<8} "
            f"{row['distribution'] or '?'} {row['version'] or ''}"
        )
        for key in ("backends", "hooks"):
            if row[key]:
                print(f"{'':14} {key}: {', '.join(row[key])}")
        if row["error"]:
            print(f"{'':14} error: {row['error']}")
        for message in row["missing"].values():
            print(f"{'':14} missing: {message}")
    return 0


def _print_first(limit: int, lines: list[str]) -> None:
    """The first ``limit`` of ``lines``, then how many more there are (``show --limit``)."""
    for line in lines[:limit]:
        print(line)
    if len(lines) > limit:
        print(f"    ... {len(lines) - limit} more (--limit)")


def _cmd_show(ns: argparse.Namespace) -> int:
    from .saved_runs import RunNotFound, find_saved_run

    try:
        handle = find_saved_run(ns.run, opts.tracking_dir(ns))
    except RunNotFound:
        # a run of a tracker's own files, without a saved handle (copied, or from before run
        # handles were saved): the plugin whose files they are shows it
        from .readback import show_run_files

        lines = show_run_files(ns.run, opts.tracking_dir(ns), ns.limit) if ns.run else None
        if lines is None:
            raise
        for line in lines:
            print(line)
        return 0
    from .readback import read_configs, read_trackers

    print(f"run {handle.run_id} ({handle.name})  {handle.run_dir}")
    print(f"trackers: {', '.join(handle.backends) or 'none'}")
    for report in read_trackers(handle):
        state = f"  {report.status}" if report.status else ""
        print(f"\n[{report.tracker}] {report.where}{state}")
        if report.detail:
            print(f"  {report.detail}")
        if report.error:
            print(f"  cannot read it: {report.error}")
            continue
        if report.last:
            print(f"  last values of {len(report.last)} series:")
        series = sorted(report.last.items())
        _print_first(
            ns.limit, [f"    {name} = {value:.6g}" + ("" if step is None else f" (step {step})") for name, (value, step) in series]
        )
        for kind, names in sorted(report.held.items()):
            print(f"  {kind}: {sum(names.values())} in {len(names)} name(s)")
            _print_first(ns.limit, [f"    {name} ({count})" for name, count in sorted(names.items())])
    traces = sorted(handle.run_dir.glob("trace-*.json"))
    if traces:
        print("\nphase traces (each rank's timer spans; open in ui.perfetto.dev or chrome://tracing):")
    for path in traces:
        try:
            events = json.loads(path.read_text())["traceEvents"]
            spans = [e for e in events if e.get("ph") == "X"]
            print(f"  {path}  ({len(spans)} spans of {len({e.get('pid') for e in spans})} rank(s))")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            print(f"  {path}  (cannot read it: {type(exc).__name__}: {exc})")
    configs = read_configs(handle)
    print(f"\nconfigs, per namespace (saved in {handle.run_dir / 'config'}):" if configs else "\nno config saved")
    for namespace, (values, hidden) in configs.items():
        print(f"  [{namespace}] {len(values)} keys" + (f" ({hidden} unset tracking options not shown)" if hidden else ""))
        _print_first(ns.limit, [f"    {key} = {json.dumps(values[key], default=str)[:120]}" for key in sorted(values)])
    return 0


def _cmd_diff(ns: argparse.Namespace) -> int:
    from .config.diff import diff_command
    from .saved_runs import find_saved_run

    # default: the latest run, as for show and ui
    run = ns.run or str(find_saved_run(None, opts.tracking_dir(ns)).run_dir)
    return diff_command(run, ns.roles, opts.tracking_dir(ns))


def _cmd_sync(ns: argparse.Namespace) -> int:
    path = ns.path or opts.tracking_dir(ns)
    if not os.path.exists(path):
        where = "" if ns.path else " (the tracking directory: --tracking-dir / $TRACKING_CORE_DIR)"
        raise TrackingError(f"{path} does not exist{where}")
    from .delivery.sync import DEFAULT_TIMEOUT, NoTrackingData, sync, sync_timeout
    from .views import sync_command

    try:
        timeout = DEFAULT_TIMEOUT if ns.timeout is None else sync_timeout(ns.timeout)
    except ValueError as exc:
        raise TrackingError(str(exc)) from exc
    try:
        report = sync(path, stream=None if ns.quiet else sys.stderr, timeout=timeout)
    except NoTrackingData as exc:
        where = "" if ns.path else f" (the tracking directory: --tracking-dir, else ${opts.DIR_ENV}, else ./{settings.DEFAULT_TRACKING_DIR})"
        raise TrackingError(
            f"{exc}{where}; name the tracking directory the job's process wrote in on this host "
            "(its --tracking-dir or $TRACKING_CORE_DIR there), or a journal folder"
        ) from exc
    print(
        f"synced {report.records} values from {report.journals} journal(s) under {path}; "
        f"{len(report.removed)} complete journal(s) removed"
    )
    for line in report.tracker_lines():
        print(f"  {line}")
    if not (report.journals or report.skipped_live or report.errors or report.finished_elsewhere):
        print(f"  nothing left to deliver under {path}")
    for folder in report.finished_elsewhere:
        print(f"  {folder} was completed by the process that was delivering it")
    for item in report.opened:
        print(f"  opened the run in {item.split(':', 1)[1]} (it was never reached)")
    for item in report.skipped_live:
        print(f"  skipped {item}")
    for folder, count in report.bad_lines.items():
        print(f"  read past {count} unreadable line(s) (cut or garbage) in {folder}")
    for error in report.errors:
        print(f"  ERROR {error}", file=sys.stderr)
    if report.errors:
        print(
            f"what is missing stays in its journal: run `{sync_command(path, timeout)}` "
            "again once the trackers named above can take it",
            file=sys.stderr,
        )
    return 1 if report.errors else 0


def _cmd_ui(ns: argparse.Namespace) -> int:
    from .saved_runs import find_saved_run
    from .viewers import log_dir, plan_viewers, serve

    handle = find_saved_run(ns.run, opts.tracking_dir(ns))
    trackers = [t.strip() for t in ns.trackers.split(",") if t.strip()] if ns.trackers else None
    ports = {key.removeprefix(_PORT_DEST): port for key, port in vars(ns).items() if key.startswith(_PORT_DEST) and port}
    viewers = plan_viewers(handle, host=ns.host, ports=ports, trackers=trackers, dry_run=ns.dry_run)
    if not viewers:
        known = ", ".join(handle.backends) or "none"
        raise TrackingError(f"run {handle.run_id} has no tracker {ns.trackers!r}; its trackers: {known}")
    for viewer in viewers:
        if viewer.warning:
            print(f"tracking-core ui: {viewer.warning}", file=sys.stderr)
    print(f"run {handle.run_id} ({handle.run_dir})", flush=True)
    if ns.dry_run:
        import shlex

        for viewer in viewers:
            what = shlex.join(viewer.command) if viewer.command else viewer.note
            print(f"{viewer.tracker}: {what}" + (f"  -> {viewer.url}" if viewer.command else ""))
        return 0
    return serve(viewers, out=sys.stdout, logs=log_dir(handle), wait=ns.wait)


#: ``--<backend>-port N`` is kept as ``ns.<_PORT_DEST><backend>``.
_PORT_DEST = "viewer port of "


class _UiParser(CommandParser):
    """The parser of ``ui``: a ``--<backend>-port`` option for every installed backend whose
    plugin declares a viewer port, added when ``ui`` is parsed (its ``--help`` included), so
    that building the ``tracking-core`` parser loads no plugin."""

    _ports_added = False

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if not self._ports_added:
            self._ports_added = True
            from .viewers import viewer_ports

            for name, port in viewer_ports().items():
                if f"--{name}-port" not in self._option_string_actions:
                    self.add_argument(
                        f"--{name}-port", type=int, dest=_PORT_DEST + name, default=argparse.SUPPRESS,
                        metavar="PORT", help=f"the port of {name}'s viewer (default {port}, or the next free port)",
                    )  # fmt: skip
        return super().parse_known_args(args, namespace)


def _cmd_plugin(ns: argparse.Namespace) -> int:
    """A plugin's command: its own parser (built now) parses what followed its name."""
    command: Command = ns.plugin_command
    prog = f"tracking-core {command.name}"
    if command.parser is None:
        parser = CommandParser(prog=prog, description=command.help)
    else:
        own = command.parser()
        parser = CommandParser(prog=prog, description=own.description, parents=[own], add_help=False)
    argv = list(ns.command_argv)
    if ns.tracking_dir and "--tracking-dir" in parser._option_string_actions:
        if not any(a.partition("=")[0] == "--tracking-dir" for a in argv):
            argv = ["--tracking-dir", ns.tracking_dir, *argv]  # given before the command
    return int(command.run(parser.parse_args(argv)) or 0)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """The subcommands of ``parser`` (built by :func:`build_parser`)."""
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def add_plugin_commands(parser: argparse.ArgumentParser) -> dict[str, Command]:
    """Add the commands of the installed plugins (``register_commands``) to ``parser`` (built by
    :func:`build_parser`); everything after such a command's name is its own parser's."""
    from .plugins import get_plugin_manager

    sub = _subparsers(parser)
    commands = get_plugin_manager().commands(reserved=tuple(sub.choices))
    for name, command in commands.items():
        p = sub.add_parser(name, add_help=False, help=command.help, description=command.help)
        p.set_defaults(func=_cmd_plugin, plugin_command=command, command_argv=[])
    return commands


TRACKING_DIR_HELP = f"default: ${settings.DIR}, else ./{settings.DEFAULT_TRACKING_DIR}"


def _tracking_dir(parser: argparse.ArgumentParser, help: str = TRACKING_DIR_HELP) -> None:
    # SUPPRESS: left out, it does not overwrite the value given before the subcommand.
    parser.add_argument("--tracking-dir", default=argparse.SUPPRESS, metavar="DIR", help=help)


def settings_help(width: int | None = None) -> str:
    """Every ``TRACKING_CORE_*`` setting with what it does (:data:`tracking_core.settings.ALL`),
    for ``tracking-core --help`` (``width``: the terminal's, as argparse wraps its help)."""
    if width is None:
        width = shutil.get_terminal_size().columns - 2
    name_width = max(len(name) for name in settings.ALL) + 2
    lines = ["settings (environment variables; where an option is named beside one, the option wins):"]
    for name, what in settings.ALL.items():
        wrapped = textwrap.wrap(what, width=max(40, width - name_width - 2)) or [""]
        lines.append(f"  {name:<{name_width}}{wrapped[0]}")
        lines += [f"  {'':<{name_width}}{more}" for more in wrapped[1:]]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="tracking-core",
        description="Tracker-agnostic experiment tracking for distributed training jobs.",
        epilog=settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument(
        "--tracking-dir",
        metavar="DIR",
        help=f"the tracking directory, for every subcommand (the same as after it; {TRACKING_DIR_HELP})",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("plugins", help="list installed plugins, their backends and hooks")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _tracking_dir(p, "accepted, and not used: plugins are found among the installed packages, not in a tracking directory")
    p.set_defaults(func=_cmd_plugins)

    p = sub.add_parser(
        "show", help="a run: its trackers and where, last metric values, the tables, histograms, texts and artifacts each holds, phase traces, configs per namespace"
    )
    p.add_argument("run", nargs="?", help="a run directory, handle.json or run id (default: the latest run); or a run directory of a tracker's own files")
    _tracking_dir(p)
    p.add_argument("--limit", type=int, default=40, help="config keys per namespace, and series and names of each kind per tracker, shown")
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser(
        "diff",
        help="config difference between roles of a run",
        description="How the saved configs of two or more namespaces of a run differ. Two: one "
        "row per differing key with both values and the kind of change. More (--roles actor "
        "critic launch): one row per key that is not the same in all of them, with its value in "
        "each.",
    )
    p.add_argument("run", nargs="?", help="a run directory, or a run id under the tracking directory (default: the latest run)")
    p.add_argument(
        "--roles",
        nargs="+",
        action=_TwoOrMore,
        default=["actor", "critic"],
        metavar="ROLE",
        help="two or more namespaces (default: actor critic)",
    )
    _tracking_dir(p)
    p.set_defaults(func=_cmd_diff)

    p = sub.add_parser(
        "sync",
        help="replay journals to the backends that lack their records",
        description="Deliver what the journals under PATH still hold to the trackers their runs "
        "used. Exit status: 0 all delivered, or nothing left to deliver; 1 something still "
        "missing (listed); 2 PATH does not exist or holds no tracking data.",
    )
    p.add_argument(
        "path",
        nargs="?",
        help="a tracking directory, journal folder or file (default: this process's tracking "
        "directory: --tracking-dir, else $TRACKING_CORE_DIR, else ./tracking-runs)",
    )
    _tracking_dir(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--timeout",
        metavar="SECONDS",
        help="the most the whole sync may take (default 300, at most 604800: a week): waiting for a process "
        "still delivering a journal and every tracker's delivery; a tracker call that has not "
        "returned by then is given up (each tracker is delivered in a process of its own) and "
        "what is left is listed, exit status 1",
    )
    p.set_defaults(func=_cmd_sync)

    p = sub.add_parser(
        "ui",
        help="start the viewers of a run's trackers and print their URLs",
        description="Start the viewer of each tracker of the run that has one here (its plugin "
        "says which: a tracker's UI on the run's store or log directory), each on a free port, "
        "wait until they answer, print their URLs; Ctrl-C stops them. `tracking-core ui --help` "
        "lists a --<tracker>-port option for each installed tracker that has a local viewer.",
    )
    p.__class__ = _UiParser  # its port options come from the plugins when `ui` is parsed
    p.add_argument("run", nargs="?", help="a run directory, handle.json or run id (default: the latest run)")
    _tracking_dir(p)
    p.add_argument("--trackers", help="only these, comma-separated (default: every tracker of the run)")
    p.add_argument("--host", default="127.0.0.1", help="interface to serve on (default 127.0.0.1)")
    p.add_argument("--wait", type=float, default=120.0, help="seconds to wait for each viewer to answer")
    p.add_argument("--dry-run", action="store_true", help="print the commands instead of starting them")
    p.set_defaults(func=_cmd_ui)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    add_plugin_commands(parser)
    ns, extra = parser.parse_known_args(argv)
    if ns.func is _cmd_plugin:  # everything after its name, --help included, is its parser's
        ns.command_argv = extra
    elif extra:  # said with the subcommand's own usage, which lists the options it has
        _subparsers(parser).choices[ns.command].error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=logging.INFO if ns.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(ns.func(ns) or 0)
    except TrackingError as exc:  # a mistake the user can fix: one line, no traceback
        print(f"tracking-core {ns.command}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `tracking-core show RUN | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes at exit
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
