"""The adapter's collector: what each slime role really ran with.

slime hands every role a different namespace: the actor and the critic get their own copies with
the ``--megatron-config-path`` overrides applied (and the critic slime's forced settings), the
rollout manager the launch args. Logging the launch args for all of them records the wrong
learning rate for at least one role, so this collector answers ``collect_config(role, args)`` with
the role's *effective* args, resolved the way slime resolves them
(:func:`slime_integration.role_args.resolve_role_args`), plus where the role runs (its placement
from slime's flags, and the Megatron layout when Megatron is initialised in this process).

It runs in the role's writer process, inside ``tracking_core.attach``, and only for attaches made
by the adapter's drop-ins (:func:`collecting`): a plain ``tracking_core.attach`` elsewhere in the
same process is not given slime's args. Resolving is idempotent, so it is right whether ``args`` is
the launch namespace or (as in slime's Ray actors) the role's own already-resolved copy.

The role's args hold the tracking options too (tracking-core's, its plugins', the adapter's own
``--tracking-log-samples`` and the proposed MLflow flags); the config pipeline keeps them out of
the role's params (:func:`tracking_core.options.tracking_option_dests`). A Ray actor never saw the
parser, so the drop-ins first make the adapter's flags known in its process
(:func:`declare_adapter_options`).
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from tracking_collectors.system import megatron_layout

from tracking_core.host_api import ARGS_ATTR
from tracking_core.plugin_api import hookimpl

from .role_args import SUPPORTED_ROLES, resolve_role_args

log = logging.getLogger("tracking_core.slime.collectors")

#: Attributes of slime's args that are plumbing of this adapter, not configuration of the role.
NOT_CONFIG = frozenset({ARGS_ATTR})

_declared = False
_active: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "tracking_core_slime_collecting", default=False
)


@contextlib.contextmanager
def collecting() -> Iterator[None]:
    """Within this block, :func:`collect_config` answers for slime roles (the drop-ins use it)."""
    token = _active.set(True)
    try:
        yield
    finally:
        _active.reset(token)


def role_args(role: str, args: Any) -> dict[str, Any]:
    """``role``'s effective args as a dict: actor and critic resolved from
    ``args.megatron_config_path`` as slime does, any other role (``rollout``) ``args`` as given.

    A file that cannot be read or is malformed is reported (warning) and the args as given are
    returned: in slime's actors they already are the role's resolved args.
    """
    if role in SUPPORTED_ROLES and hasattr(args, "__dict__"):
        path = getattr(args, "megatron_config_path", None)
        try:
            args = resolve_role_args(args, path, (role,))[role]
        except Exception as exc:  # noqa: BLE001 - a bad file must not stop training
            log.warning(
                "could not resolve the %s args from --megatron-config-path %s (%s: %s); logging "
                "the args this process was given instead",
                role,
                path,
                type(exc).__name__,
                exc,
            )
    try:
        values = dict(vars(args))
    except TypeError:
        values = dict(args) if isinstance(args, Mapping) else {}
    for key in NOT_CONFIG:
        values.pop(key, None)
    return values


def placement(role: str, args: Any) -> dict[str, Any]:
    """Where the role runs: slime's placement flags for it and, when Megatron's parallel state is
    already initialised here, the layout it set up (never imports Megatron)."""
    out: dict[str, Any] = {}
    if role in SUPPORTED_ROLES:
        for field in ("num_nodes", "num_gpus_per_node"):
            value = getattr(args, f"{role}_{field}", None)
            if value is not None:
                out[f"parallel/{field}"] = value
    elif role == "rollout":
        for field in ("rollout_num_gpus", "rollout_num_gpus_per_engine"):
            value = getattr(args, field, None)
            if value is not None:
                out[f"parallel/{field.removeprefix('rollout_')}"] = value
    out.update(megatron_layout())
    return out


def declare_adapter_options() -> None:
    """Add the adapter's options to a parser of its own, once per process: through
    :class:`tracking_core.HostParser`, which makes their destinations tracking options here
    (the driver's parser did so in the driver's process only)."""
    global _declared
    if _declared:
        return
    _declared = True  # first: adding the options registers the adapter's plugins, which call this
    from .options import add_tracking_arguments

    try:
        add_tracking_arguments(argparse.ArgumentParser(add_help=False))
    except Exception as exc:  # noqa: BLE001 - the role's config is logged all the same
        log.debug("could not list the adapter's options (%s: %s)", type(exc).__name__, exc)


@hookimpl
def collect_config(role: str, args: Any) -> Mapping[str, Any] | None:
    """The role's effective slime args and its placement; nothing outside the drop-ins."""
    if not _active.get() or args is None:
        return None
    values = role_args(role, args)
    values.update(placement(role, args))
    return values
