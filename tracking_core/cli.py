"""The ``tracking-core`` command: plugins, show, diff, sync, demo.

Each subcommand imports what it needs when it runs: building the parser imports no plugin, no
adapter and no tracker library (the demo's own options are parsed by the demo's parser, built
only when the command is ``demo``), so ``tracking-core plugins`` and ``--help`` stay cheap.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

from . import options as opts


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
        state = "disabled" if row["disabled"] else ("FAILED" if row["error"] else "ok")
        print(
            f"{row['name']:<14} {row['kind'] or '-':<18} {state:<8} "
            f"{row['distribution'] or '?'} {row['version'] or ''}"
        )
        if row["backends"]:
            print(f"{'':14} backends: {', '.join(row['backends'])}")
        if row["hooks"]:
            print(f"{'':14} hooks: {', '.join(row['hooks'])}")
        if row["error"]:
            print(f"{'':14} error: {row['error']}")
    return 0


def _cmd_show(ns: argparse.Namespace) -> int:
    from tracking_jsonl.reader import find_run, read_run

    try:
        path = find_run(ns.run, opts.tracking_dir(ns))
    except FileNotFoundError as exc:
        print(f"tracking-core show: {exc}", file=sys.stderr)
        return 2
    run = read_run(path)
    print(f"run {path.name} ({path})  status: {run.status or 'open'}")
    for namespace, section in sorted(run.configs.items()):
        params = section.get("params") or {}
        values = section.get("values") or {}
        print(f"\n[{namespace}] {len(values)} config keys ({len(params)} as parameters)")
        for key in sorted(params)[: ns.limit]:
            print(f"  {key} = {json.dumps(params[key], default=str)[:120]}")
        if len(params) > ns.limit:
            print(f"  ... {len(params) - ns.limit} more (--limit)")
    counts = run.metric_counts()
    print(f"\nmetrics: {sum(counts.values())} values in {len(counts)} series")
    for name, count in sorted(counts.items()):
        print(f"  {name}: {count}")
    return 0


def _cmd_diff(ns: argparse.Namespace) -> int:
    from .config import diff_command

    return diff_command(ns.run, ns.roles, opts.tracking_dir(ns))


def _cmd_sync(ns: argparse.Namespace) -> int:
    path = ns.path or opts.tracking_dir(ns)
    if not os.path.exists(path):
        where = "" if ns.path else " (the tracking directory: --tracking-dir / $TRACKING_CORE_DIR)"
        print(f"tracking-core sync: {path} does not exist{where}", file=sys.stderr)
        return 2
    from .delivery.sync import sync

    report = sync(path, stream=None if ns.quiet else sys.stderr)
    print(
        f"synced {report.records} values from {report.journals} journal(s) under {path}; "
        f"{len(report.removed)} complete journal(s) removed"
    )
    for item in report.opened:
        print(f"  opened the run in {item.split(':', 1)[1]} (it was never reached)")
    for item in report.skipped_live:
        print(f"  skipped {item}")
    for folder, count in report.bad_lines.items():
        print(f"  read past {count} unreadable line(s) (cut or garbage) in {folder}")
    for error in report.errors:
        print(f"  ERROR {error}", file=sys.stderr)
    return 1 if report.errors else 0


def _cmd_demo(ns: argparse.Namespace) -> int:
    # The demo's options (its hyperparameters and every plugin's tracking options) are its own
    # parser's: building them loads the plugins, which only this command needs.
    from slime_integration.demo.driver import build_parser as demo_parser
    from slime_integration.demo.driver import run_demo

    return run_demo(demo_parser().parse_args(ns.demo_argv))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracking-core",
        description="Tracker-agnostic experiment tracking for distributed training jobs.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plugins", help="list installed plugins, their backends and hooks")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_plugins)

    p = sub.add_parser("show", help="print a jsonl run: configs per role, metric counts")
    p.add_argument("run", help="a jsonl run directory, or a run id under the tracking directory")
    p.add_argument("--tracking-dir", default=None, help="default: $TRACKING_CORE_DIR or ./tracking-runs")
    p.add_argument("--limit", type=int, default=40, help="config keys shown per namespace")
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser("diff", help="config difference between roles of a run")
    p.add_argument("run", help="a run directory, or a run id under the tracking directory")
    p.add_argument("--roles", nargs=2, default=["actor", "critic"], metavar="ROLE")
    p.add_argument("--tracking-dir", default=None)
    p.set_defaults(func=_cmd_diff)

    p = sub.add_parser("sync", help="replay journals to the backends that lack their records")
    p.add_argument("path", nargs="?", default=None, help="a tracking directory, journal folder or file (default: the tracking directory)")
    p.add_argument("--tracking-dir", default=None)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_sync)

    # No arguments here: everything after `demo` (its --help included) goes to the demo's own
    # parser when the command runs (see _cmd_demo and main).
    p = sub.add_parser(
        "demo",
        add_help=False,
        help="run a slime-shaped PPO job on CPU (driver, actor and critic groups); "
        "`tracking-core demo --help` lists its options",
        description="A small real PPO job: a driver (the primary), an actor group and a critic "
        "group, each its own gloo world under torch's elastic launcher.",
    )
    p.set_defaults(func=_cmd_demo, demo_argv=[])
    return parser


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns, extra = parser.parse_known_args(argv)
    if ns.func is _cmd_demo:
        ns.demo_argv = extra
    elif extra:  # said with the subcommand's own usage, which lists the options it has
        _subcommand(parser, ns.command).error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=logging.INFO if ns.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    from .errors import TrackingError

    try:
        return int(ns.func(ns) or 0)
    except TrackingError as exc:  # a mistake the user can fix: one line, no traceback
        print(f"tracking-core {ns.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
