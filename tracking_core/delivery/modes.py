"""Where a writer's follower runs: in a delivery process (the default) or on a thread.

Trackers' client code is Python (an MLflow request costs a few milliseconds of interpreter time,
a W&B row half a millisecond); on threads of the training process it holds the GIL the training
thread needs. So by default each writing process starts one **delivery process** that runs the
:class:`~tracking_core.delivery.follower.Follower` (see :mod:`.client` and :mod:`.process`).
``delivery="thread"`` (``--tracking-delivery thread``, ``$TRACKING_CORE_DELIVERY=thread``) runs
the same follower on a thread; so does a run whose backend a new interpreter could not load (a
plugin registered at run time).

Both are a :class:`Delivery`: the run hands it what it could not journal, asks it to drain up to
a record, and finally to finish at the end record.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .. import settings
from ..errors import TrackingError
from ..plugins import PluginManager
from ..registry import BackendSpec
from .plan import Plan
from .stream import Delivery

log = logging.getLogger("tracking_core.delivery")

MODES = ("process", "thread")


class DeliveryUnavailable(TrackingError):
    """Delivery cannot run in a helper process for this run."""


class ThreadDelivery:
    """The follower on threads of this process: its methods are the follower's own."""

    pid: int | None = None

    def __init__(self, plan: Plan, manager: PluginManager, on_opened: Callable[[str, Any], None]) -> None:
        # imported here: a training process whose delivery runs in its own process never needs it
        from .follower import Follower

        follower = self.follower = Follower(plan, manager, on_opened=on_opened).start()
        self.feed, self.wake, self.drain = follower.feed, follower.wake, follower.drain
        self.finish, self.report, self.forget = follower.finish, follower.report, follower.forget


def delivery_mode(explicit: str | None, specs: Sequence[BackendSpec], manager: PluginManager) -> str:
    """``"process"`` or ``"thread"``: ``explicit`` (``delivery=`` or ``--tracking-delivery``),
    else ``$TRACKING_CORE_DELIVERY``, else process whenever a new interpreter can build every
    selected backend. An explicit ``process`` that cannot be honoured is an error saying why."""
    asked = (explicit or settings.get(settings.DELIVERY) or "").lower()
    if asked and asked not in MODES:
        source = "delivery= (--tracking-delivery)" if explicit else f"${settings.DELIVERY}"
        raise ValueError(f"{source} is {asked!r}; use one of: {', '.join(MODES)}")
    if asked == "thread" or not specs:
        return "thread"
    reason = _why_not_process(specs, manager)
    if reason is None:
        return "process"
    if asked == "process":
        raise DeliveryUnavailable(
            f"delivery in a helper process was asked for, but {reason}; use delivery='thread' "
            f"(--tracking-delivery thread, or {settings.DELIVERY}=thread)"
        )
    log.debug("delivery runs on threads of this process: %s", reason)
    return "thread"


def _why_not_process(specs: Sequence[BackendSpec], manager: PluginManager) -> str | None:
    if not sys.executable:
        return "this interpreter does not know its executable (sys.executable is empty)"
    for spec in specs:
        info = manager.plugins.get(spec.plugin)
        if info is None or info.distribution is None:
            return (
                f"backend {spec.name!r} comes from plugin {spec.plugin!r}, registered at run time "
                "rather than through an entry point, so a new interpreter cannot load it"
            )
    return None


def start_delivery(
    mode: str, plan: Plan, manager: PluginManager, on_opened: Callable[[str, Any], None]
) -> Delivery:
    if mode == "process":
        from .client import ProcessDelivery

        return ProcessDelivery(plan, on_opened, fallback=lambda: ThreadDelivery(plan, manager, on_opened))
    return ThreadDelivery(plan, manager, on_opened)
