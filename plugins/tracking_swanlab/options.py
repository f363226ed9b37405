"""What the ``swanlab`` backend needs to know, from the host's options and SwanLab's variables.

Pure functions, no ``swanlab`` import: listing plugins, adding options and computing the target
stay cheap (``import swanlab`` takes ~0.7 s), and every rule here is testable without a tracker.

Each setting is read from the host's parsed options first, then from SwanLab's own environment
variable, then a default:

==============  ===========================  ==================================================
setting         option (dest)                environment / default
==============  ===========================  ==================================================
project         ``--swanlab-project``        ``SWANLAB_PROJ_NAME``, ``SWANLAB_PROJECT_NAME``;
                                             else the working directory's name (SwanLab's own
                                             default), else ``tracking-core``
workspace       ``--swanlab-workspace``      ``SWANLAB_WORKSPACE``; the login's own
name            ``--swanlab-exp-name``       ``SWANLAB_EXP_NAME``; the job's run name
mode            ``--swanlab-mode``           ``SWANLAB_MODE``; ``cloud`` when an API key is
                                             found, else ``offline``
log dir         ``--swanlab-log-dir``        ``SWANLAB_LOG_DIR``; ``<tracking-dir>/swanlab``
API key         ``--swanlab-api-key``        ``SWANLAB_API_KEY``, or the ``.netrc`` that
                                             ``swanlab login`` writes (read by SwanLab itself)
API host        ``--swanlab-host``           ``SWANLAB_API_HOST``; SwanLab's cloud
==============  ===========================  ==================================================

Modes are SwanLab's: ``cloud`` (SwanLab calls it ``online``; every writer joins the one
experiment), ``local`` (files plus SwanLab's local dashboard, ``swanlab watch``; needs
``pip install "swanlab[dashboard]"``), ``offline`` (files only, uploaded later with
``swanlab sync``) and ``disabled``.
"""

from __future__ import annotations

import netrc
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracking_core.plugin_api import HostParser, RunContext

#: The modes SwanLab knows, as ``swanlab.init(mode=...)`` spells them.
MODES = ("online", "local", "offline", "disabled")
#: What users may type: SwanLab's names, plus ``cloud`` (SwanLab's own alias of ``online``).
MODE_CHOICES = ("cloud", *MODES)
DEFAULT_PROJECT = "tracking-core"
#: SwanLab's project names: 1-100 characters of ``[0-9a-zA-Z_\\-+.]``.
_PROJECT_NAME = re.compile(r"^[0-9a-zA-Z_\-+.]{1,100}$")
#: Characters SwanLab refuses in run ids and run directory names (OS-reserved or control).
_BAD_ID_CHARS = re.compile(r'[<>:"/\\|?*#%\x00-\x1f\x7f]')


def add_options(parser: HostParser) -> None:
    """Declare the SwanLab options; the parser skips those the host already defines."""
    parser.add_argument(
        "--swanlab-project",
        default=None,
        help="SwanLab project. Default: $SWANLAB_PROJ_NAME, else the working directory's name.",
    )
    parser.add_argument(
        "--swanlab-workspace",
        default=None,
        help="SwanLab workspace (user or organisation). Default: $SWANLAB_WORKSPACE, else the login's.",
    )
    parser.add_argument(
        "--swanlab-exp-name",
        default=None,
        help="SwanLab experiment name. Default: $SWANLAB_EXP_NAME, else the job's run name.",
    )
    parser.add_argument(
        "--swanlab-mode",
        default=None,
        choices=MODE_CHOICES,
        help=(
            "cloud (every writer joins one SwanLab experiment), local (files and `swanlab watch`), "
            "offline (one run directory per writing process, same run id; `swanlab sync` them) "
            "or disabled. Default: $SWANLAB_MODE, else cloud when an API key is found, else offline."
        ),
    )
    parser.add_argument(
        "--swanlab-log-dir",
        default=None,
        help="Where SwanLab's run directories go. Default: $SWANLAB_LOG_DIR, else <tracking-dir>/swanlab.",
    )
    parser.add_argument(
        "--swanlab-api-key",
        default=None,
        help="SwanLab API key, used to log in and never logged. Default: $SWANLAB_API_KEY.",
    )
    parser.add_argument(
        "--swanlab-host",
        default=None,
        help="SwanLab API host (a private deployment). Default: $SWANLAB_API_HOST, else SwanLab's cloud.",
    )


@dataclass(frozen=True)
class SwanlabOptions:
    """The resolved settings of one process's SwanLab run. ``api_key`` never appears in a repr."""

    mode: str
    log_dir: Path
    project: str
    workspace: str | None = None
    name: str | None = None
    host: str | None = None
    mode_explicit: bool = True
    api_key: str | None = field(default=None, repr=False)


def _first(run: RunContext, dests: tuple[str, ...], *envs: str) -> Any:
    """The first set option of ``dests``, else the first set variable of ``envs``, else None."""
    for dest in dests:
        value = run.option(dest)
        if value is not None and value != "":
            return value
    for env in envs:
        value = os.environ.get(env)
        if value:
            return value
    return None


def _netrc_has_key(path: Path) -> bool:
    try:
        hosts = netrc.netrc(str(path)).hosts
    except (OSError, netrc.NetrcParseError):
        return False
    return any(entry[2] for entry in hosts.values())


def api_key_available(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> bool:
    """Whether SwanLab can log in without asking: ``SWANLAB_API_KEY``, or the ``.netrc`` that
    ``swanlab login`` writes (``./.swanlab/.netrc``, else ``$SWANLAB_ROOT/.netrc``, else
    ``~/.swanlab/.netrc``). Read without importing swanlab, so that an unattended job without
    credentials writes offline instead of failing to start."""
    environ = os.environ if environ is None else environ
    if environ.get("SWANLAB_API_KEY"):
        return True
    root = environ.get("SWANLAB_ROOT") or environ.get("SWANLAB_SAVE_DIR")
    user_dir = Path(root) if root else Path.home() / ".swanlab"
    here = (cwd or Path.cwd()) / ".swanlab"
    return _netrc_has_key(here / ".netrc") or _netrc_has_key(user_dir / ".netrc")


def normalize_mode(mode: str) -> str:
    """SwanLab's own name of ``mode`` (``cloud`` is ``online``); a clear error for others."""
    text = str(mode).strip().lower()
    if text == "cloud":
        text = "online"
    if text not in MODES:
        raise ValueError(
            f"unknown SwanLab mode {mode!r} (from --swanlab-mode or $SWANLAB_MODE): "
            f"choose one of {', '.join(MODE_CHOICES)}"
        )
    return text


def default_project() -> str:
    """SwanLab's own default project (the working directory's name) when it is a valid
    project name, else ``tracking-core``."""
    name = Path.cwd().name
    return name if _PROJECT_NAME.match(name) else DEFAULT_PROJECT


def resolve(run: RunContext) -> SwanlabOptions:
    """The settings for ``run`` from its options, then SwanLab's environment variables."""
    api_key = _first(run, ("swanlab_api_key",))
    mode = _first(run, ("swanlab_mode",), "SWANLAB_MODE")
    explicit = mode is not None
    if mode is None:
        mode = "online" if (api_key or api_key_available()) else "offline"
    log_dir = _first(run, ("swanlab_log_dir",), "SWANLAB_LOG_DIR")
    project = _first(run, ("swanlab_project",), "SWANLAB_PROJ_NAME", "SWANLAB_PROJECT_NAME")
    if project is not None and not _PROJECT_NAME.match(str(project)):
        raise ValueError(
            f"SwanLab project name {project!r} (from --swanlab-project or $SWANLAB_PROJ_NAME) "
            "must be 1 to 100 characters of letters, digits, '_', '-', '+' and '.'"
        )
    return SwanlabOptions(
        mode=normalize_mode(mode),
        log_dir=(
            Path(log_dir).expanduser().absolute()
            if log_dir
            else (Path(run.tracking_dir) / "swanlab").absolute()
        ),
        project=str(project) if project else default_project(),
        workspace=_first(run, ("swanlab_workspace",), "SWANLAB_WORKSPACE"),
        name=_first(run, ("swanlab_exp_name",), "SWANLAB_EXP_NAME"),
        host=_first(run, ("swanlab_host",), "SWANLAB_API_HOST"),
        mode_explicit=explicit,
        api_key=str(api_key) if api_key else None,
    )


def run_id_for(run: RunContext) -> str:
    """The SwanLab run id: the job's run id (every tracker shows the same id), made safe for
    SwanLab (no OS-reserved characters, at most 64 characters)."""
    return _BAD_ID_CHARS.sub("-", str(run.run_id))[:64] or "run"


def target(run: RunContext) -> dict[str, Any]:
    """Where the job's SwanLab experiment goes, computed once when the run starts (no
    ``swanlab`` import, no connection): ``{id, project, workspace, name, mode, log_dir}``.
    Never a credential: the API key and the host stay with each process's own options."""
    opts = resolve(run)
    return {
        "id": run_id_for(run),
        "project": opts.project,
        "workspace": opts.workspace,
        "name": opts.name or run.name,
        "mode": opts.mode,
        "log_dir": str(opts.log_dir),
    }


def run_dir_name(run_id: str, label: str, now: float | None = None) -> str:
    """The run directory of one writing process: ``run-<time>-<id>-<label>`` (SwanLab's own
    pattern, ``run-<time>-<id>``, with the writer's label, so a role's directory says whose it is
    and two processes starting in the same second never collide)."""
    stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(now))
    safe_label = _BAD_ID_CHARS.sub("-", label) or "writer"
    return f"run-{stamp}-{run_id}-{safe_label}"[:255]


def sync_commands(log_dir: str | os.PathLike[str], run_id: str) -> list[str]:
    """The ``swanlab sync`` commands that upload every writer's directory of the job into one
    SwanLab experiment, the primary's last (each upload replaces the experiment's config with
    that directory's, and the primary's holds every role's; its finish record sets the state)."""
    root = Path(log_dir)
    dirs = sorted(p for p in root.glob(f"run-*-{run_id}-*") if p.is_dir())
    primary = [p for p in dirs if p.name.split(f"-{run_id}-", 1)[-1].startswith("primary")]
    ordered = [p for p in dirs if p not in primary] + primary
    return [f"swanlab sync --id {run_id} {p}" for p in ordered]


#: SwanLab's own start banner, printed by each writer in offline mode, says "Run `swanlab sync
#: <run dir>` to sync this run", without ``--id``; uploaded that way, each writer's directory
#: becomes an experiment of its own. Printed under :func:`sync_commands` so nobody follows it.
BANNER_NOTE = (
    "SwanLab's own banner suggests `swanlab sync <dir>` without --id; use the commands here, with "
    "--id, so that every writer's directory goes into the one experiment and the run is not duplicated"
)
