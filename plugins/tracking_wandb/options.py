"""What the ``wandb`` backend needs to know, resolved from the host's options and W&B's variables.

Pure functions, no ``wandb`` import: listing plugins and adding options stay cheap, and every rule
here is testable without a tracker.

Each setting is read from the host's parsed options first (slime's own ``--wandb-*`` dests, or the
ones :func:`add_options` added where the host lacks them), then from W&B's usual environment
variable, then a default:

==============  ==========================================  =======================================
setting         option dests (first set wins)               environment / default
==============  ==========================================  =======================================
project         ``wandb_project``                           ``WANDB_PROJECT``; W&B's own default
entity          ``wandb_entity``, ``wandb_team`` (slime)    ``WANDB_ENTITY``; the login's default
group           ``wandb_group``                             ``WANDB_RUN_GROUP``
name            ``wandb_name``, ``wandb_exp_name`` (Mcore)  ``WANDB_NAME``; the run's name
mode            ``wandb_mode``                              ``WANDB_MODE``; online, or offline when
                                                            no API key can be found
dir             ``wandb_dir``, ``wandb_save_dir`` (Mcore)   ``WANDB_DIR``; the tracking directory
host            ``wandb_host``                              ``WANDB_BASE_URL``
API key         ``wandb_key`` (slime)                       ``WANDB_API_KEY`` (read by W&B itself)
run id          ``wandb_run_id`` (slime: resume this run)   the job's run id
console         ``wandb_console``                           ``WANDB_CONSOLE``; ``off`` (see below)
==============  ==========================================  =======================================

As everywhere in W&B, ``dir`` names the directory W&B creates its ``wandb/`` folder in: by default
the runs land in ``<tracking_dir>/wandb/``, beside the other trackers' local data.

Console capture is off unless asked for: W&B records what the process prints, and hosts print
their whole argument namespace (Megatron's argument dump includes ``--wandb-key``), which no
redaction here can see.
"""

from __future__ import annotations

import netrc
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tracking_core.plugin_api import HostParser, RunContext

MODES = ("online", "offline", "disabled")
#: W&B's console capture choices (``wandb.Settings.console``).
CONSOLE_CHOICES = ("off", "auto", "wrap", "redirect", "wrap_raw", "wrap_emu")
DEFAULT_CONSOLE = "off"
#: W&B rejects run ids containing these characters.
_BAD_ID_CHARS = re.compile(r"[/\\#?%:\s]")
DEFAULT_HOST = "https://api.wandb.ai"


def add_options(parser: HostParser) -> None:
    """Declare the W&B options; the parser skips those the host already defines (slime has most
    of them; their dests are the same, so resolution below reads either)."""
    parser.add_argument(
        "--wandb-project",
        default=None,
        help="W&B project. Default: $WANDB_PROJECT, else W&B's default project.",
    )
    parser.add_argument(
        "--wandb-entity",
        default=None,
        help="W&B entity (team or user). Default: $WANDB_ENTITY, else the login's default.",
    )
    parser.add_argument(
        "--wandb-group",
        default=None,
        help="W&B run group. Default: $WANDB_RUN_GROUP.",
    )
    parser.add_argument(
        "--wandb-mode",
        default=None,
        choices=MODES,
        help=(
            "online (every process joins one run in W&B's shared mode), offline (one run "
            "directory per writing process, same run id; `wandb sync` them) or disabled. "
            "Default: $WANDB_MODE, else online when an API key is found, else offline."
        ),
    )
    parser.add_argument(
        "--wandb-dir",
        default=None,
        help=(
            "Directory W&B creates its wandb/ folder of run files in. "
            "Default: $WANDB_DIR, else the tracking directory (runs go to <tracking-dir>/wandb/)."
        ),
    )
    parser.add_argument(
        "--wandb-host",
        default=None,
        help="W&B server URL. Default: $WANDB_BASE_URL, else W&B's cloud.",
    )
    parser.add_argument(
        "--wandb-console",
        default=None,
        choices=CONSOLE_CHOICES,
        help=(
            "W&B console capture. Default: $WANDB_CONSOLE, else off: captured output can carry "
            "secrets the host prints (e.g. an argument dump)."
        ),
    )


@dataclass(frozen=True)
class WandbOptions:
    """The resolved settings of one process's W&B run. ``api_key`` never appears in a repr."""

    mode: str
    root: Path
    project: str | None = None
    entity: str | None = None
    group: str | None = None
    name: str | None = None
    host: str | None = None
    run_id: str | None = None
    console: str = DEFAULT_CONSOLE
    mode_explicit: bool = True
    random_suffix: bool = False
    api_key: str | None = field(default=None, repr=False)


def _first(run: RunContext, dests: tuple[str, ...], env: str | None = None) -> Any:
    """The first set option of ``dests``, else the environment variable ``env``, else None."""
    for dest in dests:
        value = run.option(dest)
        if value is not None and value != "":
            return value
    return (os.environ.get(env) or None) if env else None


def api_key_available(host: str | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether W&B can log in without asking: ``WANDB_API_KEY``, an identity token file, or an
    entry for the server in the netrc file ``wandb login`` writes. Read without importing wandb,
    so that an unattended job without credentials writes offline instead of failing to start."""
    environ = os.environ if environ is None else environ
    if environ.get("WANDB_API_KEY") or environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    server = host or environ.get("WANDB_BASE_URL") or DEFAULT_HOST
    machine = urlsplit(server if "://" in server else f"https://{server}").hostname or server
    path = environ.get("NETRC") or os.path.join(
        os.path.expanduser("~"), "_netrc" if os.name == "nt" else ".netrc"
    )
    try:
        return netrc.netrc(path).authenticators(machine) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def resolve(run: RunContext) -> WandbOptions:
    """The settings for ``run`` from its options, then W&B's environment variables."""
    api_key = _first(run, ("wandb_key",))
    host = _first(run, ("wandb_host",), "WANDB_BASE_URL")
    mode = _first(run, ("wandb_mode",), "WANDB_MODE")
    explicit = mode is not None
    if mode is None:
        mode = "online" if (api_key or api_key_available(host)) else "offline"
    mode = str(mode).lower()
    if mode == "dryrun":
        mode = "offline"
    elif mode in ("run", "shared"):
        mode = "online"
    if mode not in MODES:
        raise ValueError(
            f"unknown W&B mode {mode!r} (from --wandb-mode or $WANDB_MODE): "
            f"choose one of {', '.join(MODES)}"
        )
    root = _first(run, ("wandb_dir", "wandb_save_dir"), "WANDB_DIR")
    console = str(_first(run, ("wandb_console",), "WANDB_CONSOLE") or DEFAULT_CONSOLE)
    if console not in CONSOLE_CHOICES:
        console = DEFAULT_CONSOLE
    return WandbOptions(
        mode=mode,
        root=Path(root).expanduser().absolute() if root else Path(run.tracking_dir).absolute(),
        project=_first(run, ("wandb_project",), "WANDB_PROJECT"),
        entity=_first(run, ("wandb_entity", "wandb_team"), "WANDB_ENTITY"),
        group=_first(run, ("wandb_group",), "WANDB_RUN_GROUP"),
        name=_first(run, ("wandb_name", "wandb_exp_name"), "WANDB_NAME"),
        host=host,
        run_id=_first(run, ("wandb_run_id",)),
        console=console,
        mode_explicit=explicit,
        # slime adds a random suffix to the group unless --disable-wandb-random-suffix is given
        # (dest ``wandb_random_suffix``); hosts without that option get the group as it is.
        random_suffix=bool(run.options.get("wandb_random_suffix", False)),
        api_key=str(api_key) if api_key else None,
    )


def run_id_for(run: RunContext, options: WandbOptions) -> str:
    """The W&B run id: slime's ``--wandb-run-id`` when given, else the job's run id (so every
    tracker shows the same id), made safe for W&B (at most 64 characters, no ``/\\#?%:``)."""
    rid = str(options.run_id or run.run_id)
    rid = _BAD_ID_CHARS.sub("-", rid)
    return rid[:64]


def group_for(options: WandbOptions) -> str | None:
    """The group, with slime's random suffix when slime's switch asks for it."""
    if options.group and options.random_suffix:
        return f"{options.group}_{secrets.token_hex(4)}"
    return options.group


def target(run: RunContext) -> dict[str, Any]:
    """Where the job's W&B run goes, computed once when the run starts (no ``wandb`` import, no
    connection): ``{id, project, entity, group, name, mode, dir}``, what the primary's
    ``open_run`` hands to ``wandb.init``. The id is pre-assigned (:func:`run_id_for`), so every
    process joins the same run; the group's random suffix (slime's switch) is drawn here, once.
    Never a credential: the API key and the server URL stay with each process's own options."""
    opts = resolve(run)
    return {
        "id": run_id_for(run, opts),
        "project": opts.project,
        "entity": opts.entity,
        "group": group_for(opts),
        "name": opts.name or run.name,
        "mode": opts.mode,
        "dir": str(opts.root),
    }


def tags_for(run: RunContext) -> tuple[list[str], list[str]]:
    """The run's tags as W&B tags (``key=value``, or ``key`` for an empty value) and the tags
    left out because W&B only takes 1 to 64 characters."""
    tags: list[str] = []
    left_out: list[str] = []
    for key, value in run.tags.items():
        tag = f"{key}={value}" if value not in (None, "") else str(key)
        (tags if 1 <= len(tag) <= 64 else left_out).append(tag)
    return tags, left_out
