"""Stand-in for slime/ray/rollout.py: how the rollout manager reaches the tracking functions."""

from slime.observability import logging_utils
from slime.observability.logging_utils import configure_logger, init_tracking


class RolloutManager:
    def __init__(self, args):
        configure_logger()
        self.args = args
        init_tracking(args, primary=False)

    def log_rollout(self, rollout_id, metrics):
        logging_utils.log(self.args, {**metrics, "rollout/step": rollout_id}, step_key="rollout/step")

    def dispose(self):
        logging_utils.finish_tracking(self.args)
