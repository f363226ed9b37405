"""What the policy generated, in every tracker: rollout samples as a table, rewards and response
lengths as histograms (``--tracking-log-samples N``, default 0: off).

Two ways in, the same functions:

* with :func:`slime_integration.install`, slime's ``log_rollout_data`` and ``log_eval_rollout_data``
  (``slime.observability.rollout_metrics``) are wrapped: slime's own function runs first — it
  calls the user's ``--custom-rollout-log-function-path`` function first, as always — then the
  samples are logged;
* without patching, name these functions in slime's own flags:
  ``--custom-rollout-log-function-path slime_integration.samples.log_rollout_samples`` and
  ``--custom-eval-rollout-log-function-path slime_integration.samples.log_eval_rollout_samples``.
  They return False, so slime goes on with its default metrics.

Per rollout: ``rollout/samples`` (N rows, spread evenly over the batch: index, group, prompt,
response, label, reward, response length, status, truncated) and the histograms
``rollout/reward`` and ``rollout/response_len`` of the whole batch, on ``rollout/step`` (slime's
own step for it). Per eval dataset: ``eval/<name>/samples`` and ``eval/<name>/reward`` on
``eval/step``. Strings pass the value-shape secret redaction like every table cell.

How many rows and how long a cell: :func:`wanted` / :func:`wanted_eval` and :func:`max_chars`,
from the adapter's options or the names slime's MLflow pull request gives them
(``--mlflow-log-samples-per-step``, ``--mlflow-eval-log-samples-per-step``,
``--mlflow-log-max-chars``, ``--mlflow-eval-log-max-chars``; :mod:`slime_integration.options`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger("tracking_core.slime.samples")

COLUMNS = ("index", "group", "prompt", "response", "label", "reward", "response_length", "status", "truncated")
#: The option (``args`` attribute) that turns sample logging on.
OPTION = "tracking_log_samples"
#: The option that cuts the text cells (0: whole).
MAX_CHARS_OPTION = "tracking_log_samples_max_chars"
#: The names slime's MLflow pull request (THUDM/slime#2099) gives them, rollout's and eval's.
SAMPLES_ALIASES = ("mlflow_log_samples_per_step", "mlflow_eval_log_samples_per_step")
MAX_CHARS_ALIASES = ("mlflow_log_max_chars", "mlflow_eval_log_max_chars")
#: The text columns :func:`max_chars` applies to.
TEXT_COLUMNS = ("prompt", "response", "label")


def _count(args: Any, name: str) -> int | None:
    """``args.<name>`` as a count >= 0, None when unset or not a number."""
    value = getattr(args, name, None)
    if value is None or isinstance(value, bool):
        return None
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return None


def wanted(args: Any) -> int:
    """How many samples a rollout's table holds (0: off): ``--tracking-log-samples``, else
    ``--mlflow-log-samples-per-step``."""
    return _count(args, OPTION) or _count(args, SAMPLES_ALIASES[0]) or 0


def wanted_eval(args: Any) -> int:
    """How many samples an eval dataset's table holds (0: off):
    ``--mlflow-eval-log-samples-per-step`` where given, else as for rollouts."""
    given = _count(args, SAMPLES_ALIASES[1])
    return wanted(args) if given is None else given


def max_chars(args: Any, for_eval: bool = False) -> int:
    """The longest text cell (0: whole): ``--tracking-log-samples-max-chars``, else
    ``--mlflow-log-max-chars``; for eval tables ``--mlflow-eval-log-max-chars`` where given."""
    if for_eval:
        given = _count(args, MAX_CHARS_ALIASES[1])
        if given is not None:
            return given
    return _count(args, MAX_CHARS_OPTION) or _count(args, MAX_CHARS_ALIASES[0]) or 0


def cut(text: str | None, limit: int) -> str | None:
    """``text`` in at most ``limit`` characters, the last an ellipsis where it was longer."""
    if text is None or limit <= 0 or len(text) <= limit:
        return text
    return text[: limit - 1] + "\u2026"


def rollout_step(args: Any, rollout_id: int) -> int:
    """slime's step for a rollout (``compute_rollout_step``: the train step with
    ``--wandb-always-use-train-step``, else the rollout id)."""
    try:
        if getattr(args, "wandb_always_use_train_step", False):
            return int(rollout_id * args.rollout_batch_size * args.n_samples_per_prompt // args.global_batch_size)
    except (AttributeError, TypeError, ZeroDivisionError):
        pass
    return int(rollout_id)


def reward_of(sample: Any, args: Any) -> float | None:
    """The sample's reward as slime reads it (``reward[args.reward_key]`` for a dict reward)."""
    try:
        if hasattr(sample, "get_reward_value"):
            value = sample.get_reward_value(args)
        else:
            value = getattr(sample, "reward", None)
            key = getattr(args, "reward_key", None)
            if key and isinstance(value, Mapping):
                value = value[key]
        return None if value is None else float(value)
    except (KeyError, TypeError, ValueError):
        return None


def length_of(sample: Any) -> int:
    try:
        return int(getattr(sample, "effective_response_length", None) or getattr(sample, "response_length", 0) or 0)
    except (TypeError, ValueError):
        return 0


def _status(sample: Any) -> str:
    status = getattr(sample, "status", None)
    return str(getattr(status, "value", status) or "")


def spread(count: int, n: int) -> list[int]:
    """``n`` indices spread evenly over ``range(count)`` (all of them when ``n >= count``)."""
    if n >= count:
        return list(range(count))
    if n == 1:
        return [0]
    return sorted({round(i * (count - 1) / (n - 1)) for i in range(n)})


def sample_rows(samples: Sequence[Any], n: int, args: Any, limit: int = 0) -> list[dict[str, Any]]:
    """Up to ``n`` samples as table rows (see :data:`COLUMNS`), text cells cut to ``limit``
    characters (0: whole)."""
    rows: list[dict[str, Any]] = []
    for i in spread(len(samples), n):
        s = samples[i]
        prompt = getattr(s, "prompt", "")
        rows.append(
            {
                "index": getattr(s, "index", i),
                "group": getattr(s, "group_index", None),
                "prompt": prompt if isinstance(prompt, str) else str(prompt),
                "response": str(getattr(s, "response", "") or ""),
                "label": None if getattr(s, "label", None) is None else str(s.label),
                "reward": reward_of(s, args),
                "response_length": length_of(s),
                "status": _status(s),
                "truncated": _status(s) == "truncated",
            }
        )
    if limit > 0:
        for row in rows:
            for column in TEXT_COLUMNS:
                row[column] = cut(row[column], limit)
    return rows


def _run(args: Any) -> Any:
    from .tracking import current_run

    return current_run(args)


def log_rollout_samples(
    rollout_id: int, args: Any, samples: Sequence[Any], rollout_extra_metrics: Any = None, rollout_time: Any = None
) -> bool:
    """slime's custom rollout log function signature; logs the samples, returns False."""
    n = wanted(args)
    run = _run(args) if n else None
    if run is None or not samples:
        return False
    try:
        step = rollout_step(args, rollout_id)
        rows = sample_rows(samples, n, args, max_chars(args))
        run.log_table("rollout/samples", rows, step=step, step_key="rollout/step")
        rewards = [r for r in (reward_of(s, args) for s in samples) if r is not None]
        if rewards:
            run.log_histogram("rollout/reward", rewards, step=step, step_key="rollout/step")
        run.log_histogram("rollout/response_len", [length_of(s) for s in samples], step=step, step_key="rollout/step")
    except Exception as exc:  # noqa: BLE001 - a tracking problem never stops a rollout
        log.warning("tracking-core could not log the samples of rollout %s (%s: %s)", rollout_id, type(exc).__name__, exc)
    return False


def log_eval_rollout_samples(rollout_id: int, args: Any, data: Mapping[str, Any], extra_metrics: Any = None) -> bool:
    """slime's custom eval log function signature; logs each dataset's samples, returns False."""
    n = wanted_eval(args)
    run = _run(args) if n else None
    if run is None:
        return False
    try:
        step = rollout_step(args, rollout_id)
        for name, entry in (data or {}).items():
            samples = entry.get("samples") if isinstance(entry, Mapping) else None
            if samples:
                rows = sample_rows(samples, n, args, max_chars(args, for_eval=True))
                run.log_table(f"eval/{name}/samples", rows, step=step, step_key="eval/step")
            rewards = entry.get("rewards") if isinstance(entry, Mapping) else None
            if rewards:
                run.log_histogram(f"eval/{name}/reward", [float(r) for r in rewards], step=step, step_key="eval/step")
    except Exception as exc:  # noqa: BLE001
        log.warning("tracking-core could not log the eval samples of rollout %s (%s: %s)", rollout_id, type(exc).__name__, exc)
    return False


def wrap(original: Callable[..., Any], ours: Callable[..., Any]) -> Callable[..., Any]:
    """slime's ``log_rollout_data`` / ``log_eval_rollout_data`` followed by ours (for
    :func:`slime_integration.install`): slime's result is returned unchanged."""

    def wrapped(rollout_id: int, args: Any, *rest: Any, **kwargs: Any) -> Any:
        result = original(rollout_id, args, *rest, **kwargs)
        ours(rollout_id, args, *rest, **kwargs)
        return result

    wrapped.__wrapped__ = original  # type: ignore[attr-defined]
    wrapped.__name__ = getattr(original, "__name__", "wrapped")
    wrapped.__doc__ = original.__doc__
    wrapped.__tracking_core__ = True  # type: ignore[attr-defined]
    return wrapped
