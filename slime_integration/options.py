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
implementation the adapter registers) maps ``--use-wandb`` to the ``wandb`` backend,
``--use-tensorboard`` to ``tensorboard`` and ``--use-mlflow`` to ``mlflow``; it is consulted only
when neither ``--tracking-backends`` nor ``$TRACKING_CORE_BACKENDS`` chose. When nothing asks for
a tracker, the drop-ins track nothing, as slime does (:func:`tracking_requested`).

The MLflow flags proposed for slime (:data:`SLIME_PROPOSED_OPTIONS`: ``--use-mlflow``,
``--mlflow-tracking-uri``, ``--mlflow-experiment-name``, ``--mlflow-run-name``, ``--mlflow-run-id``,
``--mlflow-log-samples-per-step``, ``--mlflow-eval-log-samples-per-step``,
``--mlflow-log-max-chars``, ``--mlflow-eval-log-max-chars``) are accepted now, as aliases of the
adapter's own options; where they are defined here they give way to slime's own definition if a
later slime adds them (:func:`yield_on_conflict`), and where slime defines them already, slime's
are reused. Their values are read from ``args`` either way.

``--wandb-key`` logs in and is never logged, ``--wandb-run-id`` resumes that run (see
:mod:`slime_integration.tracking`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

import tracking_core
from tracking_core.host_api import BACKENDS_ENV
from tracking_core.host_api import settings as core_settings
from tracking_core.plugin_api import hookimpl

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

#: MLflow flags proposed for slime in THUDM/slime#2099 and #1591 (open; flag -> argparse dest).
#: Accepted now, as aliases of tracking-core's own (``--use-mlflow`` selects the ``mlflow``
#: backend as ``--use-wandb`` selects ``wandb``; ``--mlflow-experiment-name`` names the MLflow
#: experiment like ``--mlflow-experiment``; ``--mlflow-tracking-uri`` and ``--mlflow-run-name``
#: are the MLflow backend's own names; ``--mlflow-run-id`` resumes like ``--wandb-run-id``
#: (:func:`resume_ids`); the samples and max-chars flags size the samples tables like
#: ``--tracking-log-samples`` and ``--tracking-log-samples-max-chars``, see
#: :mod:`slime_integration.samples`). Unlike :data:`SLIME_TRACKING_OPTIONS` they are defined here
#: when the parser lacks them, and such a definition yields to slime's own if slime adds the flag
#: later (no argparse clash).
SLIME_PROPOSED_OPTIONS: dict[str, str] = {
    "--use-mlflow": "use_mlflow",
    "--mlflow-tracking-uri": "mlflow_tracking_uri",
    "--mlflow-experiment-name": "mlflow_experiment_name",
    "--mlflow-run-name": "mlflow_run_name",
    "--mlflow-run-id": "mlflow_run_id",
    "--mlflow-log-samples-per-step": "mlflow_log_samples_per_step",
    "--mlflow-eval-log-samples-per-step": "mlflow_eval_log_samples_per_step",
    "--mlflow-log-max-chars": "mlflow_log_max_chars",
    "--mlflow-eval-log-max-chars": "mlflow_eval_log_max_chars",
}

#: The flags that resume a run, in the order they are tried (args dest, backend entry they name).
RESUME_OPTIONS: tuple[tuple[str, str], ...] = (("wandb_run_id", "wandb"), ("mlflow_run_id", "mlflow"))

#: slime's switches (and the proposed ``--use-mlflow``) and the backend each one selects.
SWITCHES: tuple[tuple[str, str], ...] = (
    ("use_wandb", "wandb"),
    ("use_tensorboard", "tensorboard"),
    ("use_mlflow", "mlflow"),
)

#: Set on an argparse action this module defined that gives way to a later definition.
YIELDS_ATTR = "__tracking_core_yields__"

_PROPOSED_HELP: dict[str, dict[str, Any]] = {
    "--use-mlflow": {
        "action": "store_true",
        "default": False,
        "help": "Log to MLflow (selects the mlflow backend, as --use-wandb selects wandb).",
    },
    "--mlflow-tracking-uri": {
        "default": None,
        "help": "MLflow tracking URI. Default: $MLFLOW_TRACKING_URI, else the embedded store.",
    },
    "--mlflow-experiment-name": {
        "default": None,
        "help": "MLflow experiment name (same as --mlflow-experiment).",
    },
    "--mlflow-run-name": {
        "default": None,
        "help": "MLflow run name. Default: the job's run name.",
    },
    "--mlflow-run-id": {
        "default": None,
        "help": "Resume the run that logged to this MLflow run id (or has this run id), as --wandb-run-id.",
    },
    "--mlflow-log-samples-per-step": {
        "type": int,
        "default": None,
        "metavar": "N",
        "help": "Same as --tracking-log-samples N (used when that is not given). Default: off.",
    },
    "--mlflow-eval-log-samples-per-step": {
        "type": int,
        "default": None,
        "metavar": "N",
        "help": "Rows of each eval samples table. Default: as for rollouts.",
    },
    "--mlflow-log-max-chars": {
        "type": int,
        "default": None,
        "metavar": "N",
        "help": "Same as --tracking-log-samples-max-chars N (used when that is not given).",
    },
    "--mlflow-eval-log-max-chars": {
        "type": int,
        "default": None,
        "metavar": "N",
        "help": "Longest text cell of the eval samples tables. Default: as for rollouts.",
    },
}


def add_tracking_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
) -> argparse.ArgumentParser | argparse._ArgumentGroup:
    """Add ``--tracking-backends``, ``--tracking-dir``, ``--tracking-key-style``,
    ``--tracking-log-samples``, ``--tracking-log-samples-max-chars`` and the backend options neither Megatron nor slime defines; return ``parser`` (slime's provider contract).

    Safe before slime's own flags exist (as ``add_custom_arguments``) and after (on a complete
    parser): slime's tracking flags are never defined here. The MLflow flags proposed for slime
    (:data:`SLIME_PROPOSED_OPTIONS`) are defined where the parser lacks them, and give way to
    slime's own if slime adds them afterwards.
    """
    from .tracking import register_plugins

    register_plugins()
    before = set(parser._option_string_actions)
    tracking_core.add_tracking_options(parser, reserved=SLIME_TRACKING_OPTIONS)
    host = tracking_core.HostParser(parser)
    for flag, dest in SLIME_PROPOSED_OPTIONS.items():
        host.add_argument(flag, dest=dest, **_PROPOSED_HELP[flag])
    host.add_argument(
        "--tracking-log-samples",
        type=int,
        default=0,
        metavar="N",
        help=(
            "Log N samples of each rollout (prompt, response, label, reward, length, status) as "
            "the table rollout/samples, with reward and response-length histograms; eval "
            "rollouts likewise (eval/<dataset>/samples). Default 0: off."
        ),
    )
    host.add_argument(
        "--tracking-log-samples-max-chars",
        type=int,
        default=0,
        metavar="N",
        help=(
            "Cut the prompt, response and label cells of the samples tables to N characters "
            "(the last one an ellipsis). Default 0: whole."
        ),
    )
    # A proposed flag defined here (by this function or a backend's options) gives way to
    # slime's own definition when slime adds it after add_custom_arguments.
    ours = [
        parser._option_string_actions[flag]
        for flag in SLIME_PROPOSED_OPTIONS
        if flag not in before and flag in parser._option_string_actions
    ]
    if ours:
        for action in ours:
            setattr(action, YIELDS_ATTR, True)
        yield_on_conflict(parser)
    return parser


def yield_on_conflict(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Let a later ``add_argument`` on ``parser`` replace options marked :data:`YIELDS_ATTR`
    instead of failing with argparse's conflict error; any other conflict still fails as before.

    This is argparse's own ``conflict_handler="resolve"``, limited to the options defined here:
    the flag then belongs to the later definition (slime's), with the same dest. argparse checks
    conflicts in the container that adds the option (an ``ArgumentParser`` adds optionals through
    its ``_optionals`` group), so the parser, its groups and the groups created later are covered;
    another parser sharing nothing with this one is not.
    """
    _yield_in(parser)
    for group in getattr(parser, "_action_groups", ()):
        _yield_in(group)
    if isinstance(parser, argparse.ArgumentParser) and not getattr(
        parser, "_tracking_core_groups_yield", False
    ):
        add_group = parser.add_argument_group

        def add_argument_group(*args: Any, **kwargs: Any) -> argparse._ArgumentGroup:
            group = add_group(*args, **kwargs)
            _yield_in(group)
            return group

        parser.add_argument_group = add_argument_group  # type: ignore[method-assign]
        parser._tracking_core_groups_yield = True  # type: ignore[attr-defined]


def _yield_in(container: argparse._ActionsContainer) -> None:
    if getattr(container, "_tracking_core_yielding", False):
        return
    strict = container._handle_conflict_error

    def handle_conflict(action: argparse.Action, conflicting: Any) -> None:
        conflicting = list(conflicting)
        if conflicting and all(getattr(old, YIELDS_ATTR, False) for _, old in conflicting):
            container._handle_conflict_resolve(action, conflicting)
            return
        strict(action, conflicting)

    container._handle_conflict_error = handle_conflict  # type: ignore[method-assign,assignment]
    container._tracking_core_yielding = True  # type: ignore[attr-defined]


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


def tracking_requested(args: Any) -> bool:
    """Whether the user asked for any tracking: ``--tracking-backends``,
    ``$TRACKING_CORE_BACKENDS`` or one of slime's switches (``--use-wandb``,
    ``--use-tensorboard``, ``--use-mlflow``). slime itself tracks nothing without a switch, and
    the drop-ins follow it (:func:`slime_integration.tracking.init_tracking`)."""
    if getattr(args, "tracking_backends", None):
        return True
    if core_settings.get(BACKENDS_ENV):
        return True
    return bool(selected_by_switches(args))


def resume_ids(args: Any) -> list[tuple[str, str]]:
    """(backend, id) for each resume flag given (:data:`RESUME_OPTIONS`: ``--wandb-run-id``,
    then ``--mlflow-run-id``), whoever defined the flag (slime or this module)."""
    out = []
    for dest, backend in RESUME_OPTIONS:
        value = getattr(args, dest, None)
        if value:
            out.append((backend, str(value)))
    return out


@hookimpl
def host_backends(args: Any) -> Sequence[str] | None:
    """``--use-wandb`` -> ``wandb``, ``--use-tensorboard`` -> ``tensorboard``, ``--use-mlflow``
    -> ``mlflow``; None when none is on (the drop-ins then track nothing, as slime; a plain
    ``tracking_core.start_run`` falls back to the embedded default)."""
    if args is None:
        return None
    return selected_by_switches(args) or None
