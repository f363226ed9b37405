"""Which backends a run uses.

Precedence: an explicit ``backends=`` argument, then ``--tracking-backends``, then
``$TRACKING_CORE_BACKENDS``, then the host's own switches (the ``host_backends`` hook, e.g.
slime's ``--use-wandb``), then the embedded default: of the installed backends whose plugin
declares a ``default_rank`` in its registration, the one with the highest rank (the built-ins:
MLflow on a local SQLite file in the tracking directory, else the dependency-free ``jsonl``
backend where mlflow is not installed). ``none`` selects no backend at all.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import settings
from .options import BACKENDS_ENV

if TYPE_CHECKING:
    from .plugins import PluginManager

log = logging.getLogger("tracking_core.selection")


def parse_names(value: str | Sequence[str]) -> list[str]:
    """``"wandb, mlflow"`` or ``["wandb", "mlflow"]`` → ``["wandb", "mlflow"]`` (deduplicated)."""
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    out: list[str] = []
    for item in items:
        for name in item.split(","):
            name = name.strip()
            if name and name not in out:
                out.append(name)
    if out == ["none"]:
        return []
    return out


def embedded_default(manager: PluginManager | None = None) -> str | None:
    """The backend a run uses when nothing selects one: among the backends whose plugin declares
    a ``default_rank`` and whose requirements are installed, the one with the highest rank (the
    first registered of equal ones); None when there is none."""
    if manager is None:
        from .plugins import get_plugin_manager

        manager = get_plugin_manager()
    best: tuple[int, str] | None = None
    for name, spec in manager.backends.items():
        rank = spec.default_rank
        if rank is not None and (best is None or rank > best[0]) and not spec.missing():
            best = (rank, name)
    return best[1] if best else None


def resolve_backend_names(
    args: Any = None,
    explicit: str | Sequence[str] | None = None,
    manager: PluginManager | None = None,
) -> tuple[list[str], str]:
    """The selected backend names and where the choice came from (for the start line)."""
    if explicit is not None:
        return parse_names(explicit), "start_run(backends=...)"
    flag = getattr(args, "tracking_backends", None)
    if flag:
        return parse_names(flag), "--tracking-backends"
    env = settings.get(BACKENDS_ENV)
    if env:
        return parse_names(env), f"${BACKENDS_ENV}"
    if manager is not None:
        for plugin, names in manager.call_each("host_backends", args=args):
            if names:
                return parse_names(names), f"the host's own switches (plugin {plugin!r})"
    default = embedded_default(manager)
    if default is None:
        log.warning(
            "no tracking backend selected and no installed plugin offers a default one: nothing "
            "is tracked; choose backends with --tracking-backends or $%s",
            BACKENDS_ENV,
        )
        return [], "the embedded default (none installed)"
    log.info(
        "no tracking backend selected: using the embedded default %r (local files under the "
        "tracking directory); choose others with --tracking-backends or $%s",
        default,
        BACKENDS_ENV,
    )
    return [default], "the embedded default"
