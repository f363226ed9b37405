"""A config section as TensorBoard's HParams take it. Standard library only (no tensorboardX).

HParams hold bool, int, float and str values only: null and nested values are left out here, and
named; the whole namespace still goes to TensorBoard as text
(:func:`tracking_core.config.config_text`) and stays in the section's lossless JSON artifact.

Per-launch values (ports, run and job ids, pids, hosts, timestamps: ``env/MASTER_PORT``,
``env/TORCHELASTIC_RUN_ID``, ``parallel/host``; the rule of ``tracking-core diff``,
:func:`tracking_core.config.diff.is_volatile`) are not HParams columns either. The dashboard lists
first the columns whose values differ between sessions, i.e. between roles, and shows only the
first five: a value that differs between any two processes would always be among them, ahead of
``lr``, and says nothing about the job. They stay in the config text and the JSON artifact.

In TensorBoard the role is the run (one subdirectory, one HParams session per role), so a role's
session needs no ``actor/`` prefix to say whose value it is; with the prefix every role would get
columns of its own (``actor/lr``, ``critic/lr``) and no column would compare two roles. The
backend therefore asks for the keys without the namespace's prefix (:func:`session_hparams`): one
``lr`` column holds the launch, actor and critic values side by side. The config text keeps the
prefixed keys, so nothing about whose value it is gets lost.
"""

from __future__ import annotations

import logging

from tracking_core.config import artifact_path
from tracking_core.config.diff import is_volatile
from tracking_core.plugin_api import ConfigSection

__all__ = ["session_hparams", "tensorboard_hparams"]

log = logging.getLogger("tracking_core.backends.tensorboard")

_HPARAM_TYPES = (bool, int, float, str)


def tensorboard_hparams(
    section: ConfigSection,
) -> tuple[dict[str, float | int | str | bool], list[str]]:
    """Scalar params for TensorBoard's hparams, and ``"key: reason"`` for each key left out.

    TensorBoard hparams take bool, int, float and str only: null and nested values are left out
    (and named in one message per reason), and so are per-launch values
    (:func:`tracking_core.config.diff.is_volatile`: they would lead the dashboard's columns); all of
    them are in the config text (:func:`tracking_core.config.config_text`) and the JSON artifact.
    """
    hparams: dict[str, float | int | str | bool] = {}
    left_out: list[str] = []
    nulls: list[str] = []
    nested: list[str] = []
    per_launch: list[str] = []
    for key, value in section.params.items():
        if is_volatile(key):
            per_launch.append(key)
            left_out.append(f"{key}: per-launch value (not an HParams column)")
        elif isinstance(value, _HPARAM_TYPES):
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
        (per_launch, "per-launch values (ports, ids, pids, hosts, timestamps)"),
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


def session_hparams(
    section: ConfigSection,
) -> tuple[dict[str, float | int | str | bool], list[str]]:
    """:func:`tensorboard_hparams` with the namespace's prefix taken off each key (``critic/lr``
    becomes ``lr``): the keys of the role's own HParams session, in which the TensorBoard run
    already names the role. Every key of a section has the same prefix, so no two collide; the
    keys left out are named as the section names them (with the prefix)."""
    hparams, left_out = tensorboard_hparams(section)
    prefix = section.prefix
    if not prefix:
        return hparams, left_out
    return {key.removeprefix(prefix): value for key, value in hparams.items()}, left_out
