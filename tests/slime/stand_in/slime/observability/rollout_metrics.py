"""Stand-in for slime/observability/rollout_metrics.py: how slime logs a rollout's data (the
user's custom function first, then slime's own metrics through ``logging_utils.log``)."""

from slime.observability import logging_utils
from slime.utils.misc import load_function


def log_rollout_data(rollout_id, args, samples, rollout_extra_metrics, rollout_time):
    if args.custom_rollout_log_function_path is not None:
        custom_log_func = load_function(args.custom_rollout_log_function_path)
        if custom_log_func(rollout_id, args, samples, rollout_extra_metrics, rollout_time):
            return
    log_dict = {**(rollout_extra_metrics or {})}
    log_dict["rollout/response_len/mean"] = sum(s.effective_response_length for s in samples) / len(samples)
    log_dict["perf/rollout_time"] = rollout_time
    log_dict["rollout/step"] = rollout_id
    logging_utils.log(args, log_dict, step_key="rollout/step")


def log_eval_rollout_data(rollout_id, args, data, extra_metrics=None):
    if args.custom_eval_rollout_log_function_path is not None:
        custom_log_func = load_function(args.custom_eval_rollout_log_function_path)
        if custom_log_func(rollout_id, args, data, extra_metrics):
            return
    log_dict = extra_metrics or {}
    for key in data.keys():
        rewards = data[key]["rewards"]
        log_dict[f"eval/{key}"] = sum(rewards) / len(rewards)
    log_dict["eval/step"] = rollout_id
    logging_utils.log(args, log_dict, step_key="eval/step")
    return log_dict
