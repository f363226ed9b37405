"""Stand-in for slime/utils/arguments.py: the parser's shape, with only its tracking options.

As in slime, Megatron's options exist first, ``add_custom_arguments`` runs next, and slime's own
tracking flags are added after it.
"""

import argparse

#: Set by a test to define the MLflow flags proposed in THUDM/slime#2099 / #1591 the way slime
#: would once one is merged: after ``add_custom_arguments``, beside its W&B flags.
PROPOSED_MLFLOW_FLAGS = False


def reset_arg(parser, name, **kwargs):
    for action in parser._actions:
        if name in action.option_strings:
            if "default" in kwargs:
                action.default = kwargs["default"]
            break
    else:
        parser.add_argument(name, **kwargs)


def get_slime_extra_args_provider(add_custom_arguments=None):
    def add_slime_arguments(parser):
        if add_custom_arguments is not None:
            parser = add_custom_arguments(parser)
        parser.add_argument("--use-wandb", action="store_true", default=False)
        parser.add_argument("--wandb-mode", type=str, default=None, choices=["online", "offline", "disabled"])
        parser.add_argument("--wandb-dir", type=str, default=None)
        parser.add_argument("--wandb-key", type=str, default=None)
        parser.add_argument("--wandb-host", type=str, default=None)
        parser.add_argument("--wandb-team", type=str, default=None)
        parser.add_argument("--wandb-group", type=str, default=None)
        reset_arg(parser, "--wandb-project", type=str, default=None)
        parser.add_argument(
            "--disable-wandb-random-suffix", action="store_false", dest="wandb_random_suffix", default=True
        )
        parser.add_argument("--wandb-always-use-train-step", action="store_true", default=False)
        parser.add_argument("--log-multi-turn", action="store_true", default=False)
        parser.add_argument("--log-passrate", action="store_true", default=False)
        parser.add_argument("--log-reward-category", type=str, default=None)
        parser.add_argument("--log-correct-samples", action="store_true", default=False)
        parser.add_argument("--wandb-run-id", type=str, default=None)
        parser.add_argument("--use-tensorboard", action="store_true", default=False)
        parser.add_argument("--tb-project-name", type=str, default=None)
        parser.add_argument("--tb-experiment-name", type=str, default=None)
        if PROPOSED_MLFLOW_FLAGS:
            parser.add_argument("--use-mlflow", action="store_true", default=False, help="slime's")
            parser.add_argument("--mlflow-tracking-uri", type=str, default=None, help="slime's")
            parser.add_argument("--mlflow-experiment-name", type=str, default=None, help="slime's")
            parser.add_argument("--mlflow-run-name", type=str, default=None, help="slime's")
            parser.add_argument("--mlflow-run-id", type=str, default=None, help="slime's")
            parser.add_argument("--mlflow-log-samples-per-step", type=int, default=5, help="slime's")
            parser.add_argument("--mlflow-eval-log-samples-per-step", type=int, default=None, help="slime's")
            parser.add_argument("--mlflow-log-max-chars", type=int, default=None, help="slime's")
            parser.add_argument("--mlflow-eval-log-max-chars", type=int, default=None, help="slime's")
        parser.add_argument("--megatron-config-path", type=str, default=None)
        parser.add_argument("--lr", type=float, default=1e-6)
        return parser

    return add_slime_arguments


def megatron_parser():
    """Megatron-LM's tracking options, defined before slime's provider runs."""
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--tensorboard-dir", type=str, default=None)
    parser.add_argument("--wandb-project", type=str, default="")
    parser.add_argument("--wandb-exp-name", type=str, default="")
    parser.add_argument("--wandb-save-dir", type=str, default="")
    return parser


def build_parser(add_custom_arguments=None):
    return get_slime_extra_args_provider(add_custom_arguments)(megatron_parser())


def parse_args(add_custom_arguments=None, argv=None):
    return build_parser(add_custom_arguments).parse_args(argv)
