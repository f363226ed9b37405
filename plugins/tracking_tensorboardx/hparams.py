"""A config section as TensorBoard's HParams take it. Standard library only (no tensorboardX).

HParams hold bool, int, float and str values only: null and nested values are left out here, and
named; the whole namespace still goes to TensorBoard as text
(:func:`tracking_core.config.config_text`) and stays in the section's lossless JSON artifact.
"""

from __future__ import annotations

import logging

from tracking_core.config import artifact_path
from tracking_core.records import ConfigSection

__all__ = ["tensorboard_hparams"]

log = logging.getLogger("tracking_core.backends.tensorboard")

_HPARAM_TYPES = (bool, int, float, str)


def tensorboard_hparams(
    section: ConfigSection,
) -> tuple[dict[str, float | int | str | bool], list[str]]:
    """Scalar params for TensorBoard's hparams, and ``"key: reason"`` for each key left out.

    TensorBoard hparams take bool, int, float and str only: null and nested values are left out
    (and named in one message per reason); they are in the config text
    (:func:`tracking_core.config.config_text`) and the JSON artifact.
    """
    hparams: dict[str, float | int | str | bool] = {}
    left_out: list[str] = []
    nulls: list[str] = []
    nested: list[str] = []
    for key, value in section.params.items():
        if isinstance(value, _HPARAM_TYPES):
            hparams[key] = value
        elif value is None:
            nulls.append(key)
            left_out.append(f"{key}: null (TensorBoard hparams have no null)")
        else:
            nested.append(key)
            left_out.append(
                f"{key}: {type(value).__name__} value (TensorBoard hparams take scalars only)"
            )
    for keys, reason in (
        (nulls, "null values (TensorBoard hparams have no null)"),
        (nested, "nested values (TensorBoard hparams take bool, int, float or str)"),
    ):
        if keys:
            # Not a loss: the same keys are in the config text logged beside the hparams, so
            # this is information, not a warning (a slime namespace has ~400 null keys).
            log.info(
                "TensorBoard: %d %s config key(s) not logged as hparams, %s; "
                "they are in the config text and %s: %s",
                len(keys),
                section.namespace,
                reason,
                artifact_path(section),
                ", ".join(keys),
            )
    return hparams, left_out
