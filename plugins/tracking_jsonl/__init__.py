"""The ``jsonl`` backend: plain JSON-lines files, no dependency.

One directory per run under ``<tracking_dir>/jsonl/<run_id>/``, one file per role
(``primary.jsonl`` for the driver, ``actor.jsonl``, ``critic.jsonl``, ...) holding config
sections, metric records and status lines. It is the default where mlflow is not installed, and
the easiest format to analyse offline (``tracking-core show RUN``).
"""

from __future__ import annotations

from tracking_core.plugin_api import Backend, BackendRegistrar, hookimpl

from .views import JsonlViews


@hookimpl
def register_backends(register: BackendRegistrar) -> None:
    register(
        Backend(
            "jsonl",
            "tracking_jsonl.backend:JsonlBackend",
            target="tracking_jsonl.backend:target",
            description="JSON-lines files under the tracking directory (no dependency)",
            default_rank=0,  # the embedded default where no higher-ranked backend is installed
            views=JsonlViews(),
        )
    )
