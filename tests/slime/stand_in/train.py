"""Stand-in for slime's train.py: the driver's tracking calls."""

from slime.observability.logging_utils import configure_logger, finish_tracking, init_tracking


def train(args):
    configure_logger()
    init_tracking(args)
    finish_tracking(args)
