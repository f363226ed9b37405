"""What the console plugin says about a run it held: nothing, its lines were on the terminal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracking_core.plugin_api import hookimpl


@hookimpl
def tracker_location(backend: str, entry: Mapping[str, Any]) -> list[str] | None:
    return [] if backend == "console" else None
