"""The ``wandb`` backend: one Weights & Biases run per job, every role writing into it.

* **online**: the primary opens the run in W&B's shared mode (``x_primary=True``); each role's
  writer joins the same run id in shared mode with ``x_primary=False``, its own ``x_label``
  (``actor-r0-p1234``) and ``x_update_finish_state=False``, so only the primary ends the run.
* **offline**: each writing process keeps its own offline run directory under the same run id
  (``offline-run-<time>-<id>`` for the primary, ``offline-run-<time>-<id>-<label>`` for a role):
  one run once ``wandb sync``-ed. W&B cannot resume offline: a restarted primary writes a new
  directory under the same id.
* **disabled**: W&B's no-op run.

Importing this package does not import ``wandb``: only selecting the backend does
(:mod:`tracking_wandb.backend`). See :mod:`tracking_wandb.options` for the options and the
environment variables each falls back to (and :func:`tracking_wandb.options.target`, where the
run goes, decided when it starts), :mod:`tracking_wandb.config` for the config's shape, and
:mod:`tracking_wandb.backend` for how configs, metrics and secrets are handled, and
:mod:`tracking_wandb.media` for tables (``wandb.Table``), histograms (``wandb.Histogram``), texts
(``wandb.Html``) and artifacts (``wandb.Artifact``), each on its step axis like a metric.
"""

from __future__ import annotations

from tracking_core.plugin_api import Backend, BackendRegistrar, HostParser, hookimpl

from .options import add_options as _add_options
from .views import WandbViews


@hookimpl
def register_backends(register: BackendRegistrar) -> None:
    register(
        Backend(
            "wandb",
            "tracking_wandb.backend:WandbBackend",
            target="tracking_wandb.options:target",
            requires=("wandb",),
            extra="wandb",
            description="Weights & Biases: online (shared mode) or offline run files",
            views=WandbViews(),
        )
    )


@hookimpl
def add_options(parser: HostParser) -> None:
    _add_options(parser)
