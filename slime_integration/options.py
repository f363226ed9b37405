"""slime's command line, with tracking-core's options added and slime's own switches honoured.

slime builds its parser in ``slime.utils.arguments.parse_args(add_custom_arguments=None)``: Megatron
defines its options first (``--tensorboard-dir``, ``--wandb-project``, ``--wandb-save-dir``, ...),
then slime's provider calls ``add_custom_arguments(parser)`` and only *afterwards* adds its own
tracking flags (``--use-wandb``, ``--wandb-mode``, ``--wandb-key``, ``--use-tensorboard``, ...).
A custom provider that added ``--wandb-mode`` would therefore make slime's own ``add_argument``
fail with an argparse conflict. :func:`add_tracking_arguments` is safe in both places: it treats
slime's tracking flags as already defined (:data:`SLIME_TRACKING_OPTIONS`) and lets
:class:`tracking_core.HostParser` skip whatever Megatron or slime already has.

Use it as ``parse_args(add_custom_arguments=add_tracking_arguments)``, or let
:func:`slime_integration.install` add it to slime's parser for you.

slime's switches keep their meaning. :func:`host_backends` (a ``host_backends`` hook
implementation the adapter registers) maps ``--use-wandb`` to the ``wandb`` backend and
``--use-tensorboard`` to ``tensorboard``; it is consulted only when neither
``--tracking-backends`` nor ``$TRACKING_CORE_BACKENDS`` chose, and when neither switch is on the
embedded default applies. ``--wandb-key`` logs in and is never logged, ``--wandb-run-id`` resumes
that run (see :mod:`slime_integration.tracking`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

import tracking_core
from tracking_core import hookimpl

#: The tracking flags slime adds *after* calling ``add_custom_arguments`` (flag -> argparse dest),
#: as of THUDM/slime@624b824a (``add_wandb_arguments``, ``add_tensorboard_arguments``). Backends
#: must not define these themselves; slime's values are read through the same dests.
SLIME_TRACKING_OPTIONS: dict[str, str] = {
    "--use-wandb": "use_wandb",
    "--wandb-mode": "wandb_mode",
    "--wandb-dir": "wandb_dir",
    "--wandb-key": "wandb_key",
    "--wandb-host": "wandb_host",
    "--wandb-team": "wandb_team",
    "--wandb-group": "wandb_group",
    "--wandb-project": "wandb_project",
    "--disable-wandb-random-suffix": "wandb_random_suffix",
    "--wandb-always-use-train-step": "wandb_always_use_train_step",
    "--log-multi-turn": "log_multi_turn",
    "--log-passrate": "log_passrate",
    "--log-reward-category": "log_reward_category",
    "--log-correct-samples": "log_correct_samples",
    "--wandb-run-id": "wandb_run_id",
    "--use-tensorboard": "use_tensorboard",
    "--tb-project-name": "tb_project_name",
    "--tb-experiment-name": "tb_experiment_name",
}

#: slime's switches and the backend each one selects.
SWITCHES: tuple[tuple[str, str], ...] = (("use_wandb", "wandb"), ("use_tensorboard", "tensorboard"))


def add_tracking_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
) -> argparse.ArgumentParser | argparse._ArgumentGroup:
    """Add ``--tracking-backends``, ``--tracking-dir``, ``--tracking-key-style`` and the backend
    options neither Megatron nor slime defines; return ``parser`` (slime's provider contract).

    Safe before slime's own flags exist (as ``add_custom_arguments``) and after (on a complete
    parser): slime's tracking flags are never defined here.
    """
    from .tracking import register_plugins

    register_plugins()
    tracking_core.add_tracking_options(parser, reserved=SLIME_TRACKING_OPTIONS)
    return parser


def with_tracking_arguments(
    add_custom_arguments: Callable[[Any], Any] | None = None,
) -> Callable[[Any], Any]:
    """An ``add_custom_arguments`` for slime's ``parse_args`` that adds the tracking options
    and then calls the caller's own provider (if any), so both can be passed at once."""

    def add_arguments(parser: Any) -> Any:
        parser = add_tracking_arguments(parser)
        if add_custom_arguments is not None:
            parser = add_custom_arguments(parser)
        return parser

    return add_arguments


def selected_by_switches(args: Any) -> list[str]:
    """The backends slime's own switches turn on, in a stable order (may be empty)."""
    return [backend for dest, backend in SWITCHES if getattr(args, dest, False) is True]


@hookimpl
def host_backends(args: Any) -> Sequence[str] | None:
    """``--use-wandb`` -> ``wandb``, ``--use-tensorboard`` -> ``tensorboard``; None when neither
    is on, so that the embedded default applies."""
    if args is None:
        return None
    return selected_by_switches(args) or None
