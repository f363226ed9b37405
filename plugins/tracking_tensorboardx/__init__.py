"""The ``tensorboard`` backend: TensorBoard event files written with tensorboardX.

One log directory per run, one TensorBoard *run* (subdirectory) per role: the primary writes
``<logdir>/launch`` (the launch config and the driver's own metrics), each role's writer
``<logdir>/<role>`` (``actor``, ``critic``, ...). Tags are the keys as logged (``train/pg_loss``),
never role-prefixed: in TensorBoard the role is the run, so the actor's and critic's
``train/pg_loss`` overlay in one chart. Each namespace's config goes in twice: its scalar values as
HParams (one HParams session per role subdirectory, so the dashboard lines up each role's config
with that role's metrics) and the complete config as text (tag ``config/<namespace>``). The
HParams keys are unprefixed (``lr`` in the actor's and the critic's session alike), so one column
holds every role's value side by side; the text keeps the prefixed keys.

The log directory is ``--tensorboard-dir`` (Megatron and slime define it already; then theirs is
reused), else slime's ``$TENSORBOARD_DIR``, else ``<tracking_dir>/tensorboard/<run name>``
(``<run name>-<run id>`` when another run's events are there already), decided once, when the run
starts, as the backend's target (:mod:`tracking_tensorboardx.logdir`): every writer of the job uses
that directory.

Nothing here imports tensorboardX: the backend module is imported only when ``tensorboard`` is
selected (tensorboardX imports torch, ~1.6 s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracking_core.plugin_api import Backend, hookimpl

from .views import TensorBoardViews

if TYPE_CHECKING:
    from tracking_core.plugin_api import BackendRegistrar, HostParser

#: The option and the environment variable that name the run's log directory.
DIR_OPTION = "--tensorboard-dir"
DIR_DEST = "tensorboard_dir"
DIR_ENV = "TENSORBOARD_DIR"


@hookimpl
def register_backends(register: BackendRegistrar) -> None:
    """Offer ``tensorboard``; selecting it without tensorboardX names the extra to install."""
    register(
        Backend(
            "tensorboard",
            "tracking_tensorboardx.backend:TensorBoardBackend",
            target="tracking_tensorboardx.logdir:target",
            requires=("tensorboardX",),
            extra="tensorboard",
            description="TensorBoard event files (tensorboardX), one run subdirectory per role",
            viewer_port=6006,  # `tracking-core ui` starts TensorBoard on the run's log directory
            views=TensorBoardViews(),
        )
    )


@hookimpl
def add_options(parser: HostParser) -> None:
    """Add ``--tensorboard-dir`` unless the host (Megatron, slime) already has it."""
    parser.add_argument(
        DIR_OPTION,
        dest=DIR_DEST,
        default=None,
        help=(
            "TensorBoard log directory of this run (one subdirectory per role). "
            f"Default: ${DIR_ENV}, else <tracking-dir>/tensorboard/<run name>."
        ),
    )
