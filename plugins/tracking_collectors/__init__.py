"""Built-in collectors: what every role's config should say about where and how it ran.

For each role, in its writer process: the parallel layout (world size; tensor, pipeline, data,
context and expert parallel sizes when Megatron is initialised), the writer's host and device,
whitelisted environment variables (scheduler job ids and the like — never credentials), the git
commit of the working tree, and the versions of torch, megatron-core and the tracker libraries.
Nothing here imports torch, Megatron or a tracker: it reads what the process already loaded and
the installed distributions' metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracking_core.plugin_api import hookimpl

from .system import env_vars, git_state, parallel_layout, versions


@hookimpl
def collect_config(role: str) -> Mapping[str, Any]:
    out: dict[str, Any] = {}
    out.update(parallel_layout())
    out.update(env_vars())
    out.update(git_state())
    out.update(versions())
    return out
