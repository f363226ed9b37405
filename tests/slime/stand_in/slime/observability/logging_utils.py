"""Stand-in for slime/observability/logging_utils.py: slime's signatures, no tracker.

Each function records its call in ``ORIGINAL_CALLS`` instead of talking to W&B or TensorBoard.
"""

ORIGINAL_CALLS = []


def configure_logger(prefix: str = ""):
    ORIGINAL_CALLS.append(("configure_logger", prefix))


def init_tracking(args, primary: bool = True, **kwargs):
    ORIGINAL_CALLS.append(("init_tracking", primary, kwargs))


def finish_tracking(args):
    ORIGINAL_CALLS.append(("finish_tracking",))


def log(args, metrics, step_key: str):
    ORIGINAL_CALLS.append(("log", dict(metrics), step_key))
