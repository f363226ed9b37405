"""Stand-in for slime/backends/megatron_utils/actor.py: the Megatron actor's tracking calls."""

from slime.observability import logging_utils
from slime.observability.logging_utils import init_tracking


class MegatronTrainRayActor:
    def init(self, args, role):
        self.args = args
        self.role = role
        init_tracking(args, primary=False, role=role)

    def train_step(self, step, losses):
        # slime's model.py tags the critic's metrics: train/critic-<key>
        tag = "" if self.role == "actor" else f"{self.role}-"
        log_dict = {f"train/{tag}{key}": value for key, value in losses.items()}
        log_dict["train/step"] = step
        logging_utils.log(self.args, log_dict, step_key="train/step")
