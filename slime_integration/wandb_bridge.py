"""``wandb.log`` in a process whose W&B run lives elsewhere: forwarded, with one warning.

slime code and user code call ``wandb.log`` directly after slime's ``init_tracking`` (slime's
rollout-buffer example, custom rollout log functions). With slime's own tracking that works,
because ``init_tracking`` ran ``wandb.init`` in the same process. With tracking-core, W&B's
client runs in the delivery process beside the writer, so this process has no ``wandb.run``: a
direct ``wandb.log`` raises ``wandb.Error`` ("You must call wandb.init() before wandb.log()"),
which such code catches and prints, or is skipped by a ``wandb.run is not None`` guard. Either
way the values never reach W&B.

When W&B is among the run's backends, the drop-ins therefore put :func:`_bridged_log` in place
of ``wandb.log`` in that process (:func:`install`). While this process has no ``wandb.run`` of
its own, a call warns once and forwards the numbers to this process's tracking-core run
(:func:`slime_integration.current_run`), which delivers them to W&B and to every other selected
tracker, with slime's step axes (``train/step``, ``rollout/step``, ``eval/step`` when the dict
carries one, as slime's ``log`` does). Why forward rather than only warn: the caller asked for
these values to be in W&B, and forwarding is the one behaviour that keeps them; the warning
says that it happened and names the explicit call to use instead
(``slime_integration.current_run().log_metrics``). Where this process does have a ``wandb.run``
(the user called ``wandb.init`` here), ``wandb.log`` is W&B's own, untouched. Where there is no
tracking-core run either, W&B's own function runs (and raises as it always did).

Limits: only numbers are forwarded (a ``wandb.Table`` or an image is skipped and counted in the
finish summary; log tables with ``current_run().log_table``); ``from wandb import log`` bound
before :func:`install` keeps W&B's function; a ``wandb.run is not None`` guard still skips (there
is no ``wandb.run`` to offer without opening a second W&B run).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

logger = logging.getLogger("tracking_core.slime.wandb")

#: slime's step axes (its ``define_metric`` calls), in the order a mixed dict is looked at.
STEP_KEYS: tuple[str, ...] = ("train/step", "rollout/step", "eval/step")
#: Set on the replacement: the function it replaced.
ORIGINAL_ATTR = "__tracking_core_original__"

_lock = threading.Lock()
_warned: set[str] = set()


def _current_run() -> Any:
    from .tracking import current_run

    return current_run()


def _warn_once(key: str, message: str, *args: Any, **kwargs: Any) -> None:
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    logger.warning(message, *args, **kwargs)


def step_of(data: Mapping[str, Any], step: Any = None) -> tuple[str | None, Any]:
    """(axis, step) for a ``wandb.log`` call: the first of slime's axes the dict carries, as
    slime's ``log(args, metrics, step_key)`` would be called; else ``step=`` (no named axis)."""
    for key in STEP_KEYS:
        if key in data:
            return key, data[key]
    return None, step


def forward(run: Any, data: Mapping[str, Any], step: Any = None) -> None:
    """Log ``data`` (a ``wandb.log`` dict) to tracking-core ``run``, on slime's axes."""
    from .tracking import _step_of

    axis, raw = step_of(data, step)
    values = {key: value for key, value in data.items() if key != axis}
    run.log_metrics(values, step=_step_of(raw), step_key=axis)


def _bridged_log(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def log(data: Mapping[str, Any] | None = None, step: int | None = None, *args: Any, **kwargs: Any) -> Any:
        wandb = sys.modules.get("wandb")
        if wandb is None or getattr(wandb, "run", None) is not None or not isinstance(data, Mapping):
            return original(data, step, *args, **kwargs)
        run = _current_run()
        if run is None:
            return original(data, step, *args, **kwargs)
        _warn_once(
            "forward",
            "wandb.log() was called in a process without a W&B run of its own (with tracking-core "
            "the W&B client runs beside the writer, not in this process), so it would log "
            "nothing; its values (%s) are forwarded to tracking-core run %s and reach W&B and "
            "every other selected tracker from there. Call "
            "slime_integration.current_run().log_metrics(metrics, step=..., step_key=...) "
            "instead of wandb.log to log explicitly (only numbers are forwarded)",
            ", ".join(list(map(str, data))[:5]) + (", ..." if len(data) > 5 else ""),
            getattr(run, "run_id", None),
        )
        try:
            forward(run, data, step)
        except Exception:  # noqa: BLE001 - logging must never stop training
            _warn_once("fail", "forwarding wandb.log() to tracking-core failed", exc_info=True)
        return None

    setattr(log, ORIGINAL_ATTR, original)
    return log


def install() -> bool:
    """Put the forwarding ``wandb.log`` in place in this process (imports wandb if it is
    installed; idempotent). Returns whether ``wandb.log`` is now the forwarding one."""
    wandb = sys.modules.get("wandb")
    if wandb is None:
        try:
            if importlib.util.find_spec("wandb") is None:
                return False
            wandb = importlib.import_module("wandb")
        except Exception:  # noqa: BLE001 - a broken wandb install is W&B's backend's to report
            return False
    with _lock:
        current = getattr(wandb, "log", None)
        if current is None:
            return False
        if getattr(current, ORIGINAL_ATTR, None) is None:
            wandb.log = _bridged_log(current)  # type: ignore[attr-defined]
    return True


def uninstall() -> None:
    """Put W&B's own ``wandb.log`` back and forget the warning (tests; a process leaving
    slime behind)."""
    wandb = sys.modules.get("wandb")
    with _lock:
        _warned.clear()
        if wandb is None:
            return
        original = getattr(getattr(wandb, "log", None), ORIGINAL_ATTR, None)
        if original is not None:
            wandb.log = original  # type: ignore[attr-defined]
