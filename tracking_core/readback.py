"""Reading a run back from where it was logged: ``tracking-core show RUN``.

A run is found by its saved handle (:mod:`tracking_core.saved_runs`), which names every tracker
of the run and where its data went. The configs of every namespace are read from the run
directory (tracking-core keeps each one losslessly there, whatever the trackers), and each
tracker of the run is asked what it holds by its plugin's ``read_tracker`` hook, which reads it
with the tracker's own client, so what is shown is what that tracker will show. The trackers
are read concurrently; one that cannot be read (library missing, server down) is reported on
its line, and the others are still read. A tracker whose plugin has no reader is listed with
where its data went.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .handle import RunHandle

__all__ = ["TrackerReport", "read_configs", "read_trackers"]


@dataclass
class TrackerReport:
    """What one tracker holds of the run (what a plugin's ``read_tracker`` returns): ``where``
    its data is, the run's ``status`` there, a line of ``detail``; ``last`` maps a series to its
    last ``(value, step)`` (``step`` None where the tracker keeps no step with the value);
    ``error`` says why the tracker could not be read, when it could not."""

    tracker: str
    where: str
    status: str | None = None
    detail: str = ""
    last: dict[str, tuple[float, int | None]] = field(default_factory=dict)
    error: str | None = None


def read_configs(handle: RunHandle) -> dict[str, dict[str, Any]]:
    """Each namespace's saved config (``launch``, ``actor``, ...): its ``values`` as logged."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((handle.run_dir / "config").glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("values"), dict):
            out[str(doc.get("namespace") or path.stem)] = doc["values"]
    return out


def _install_command(tracker: str, exc: ImportError) -> str:
    """What installs the reader of ``tracker``: the extra of the plugin that offers it (the
    packages named), else the missing module as a package."""
    from .plugins import get_plugin_manager

    missing = [exc.name] if exc.name else []
    spec = get_plugin_manager().backends.get(tracker)
    if spec is not None and spec.extra:
        return spec.install_command(missing)
    return f"pip install {' '.join(missing) or tracker}"


def _read_one(name: str, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport:
    from .viewers import ask

    try:
        report = ask("read_tracker", backend=name, entry=entry, handle=handle)
        if report is None:
            return TrackerReport(name, json.dumps(dict(entry), sort_keys=True, default=str), detail="no local reader")
        return report
    except ImportError as exc:
        where = json.dumps(dict(entry), sort_keys=True, default=str)
        return TrackerReport(name, where, error=f"{exc}; to read it here: {_install_command(name, exc)}")
    except Exception as exc:  # noqa: BLE001 - one tracker's failure is its own line
        where = json.dumps(dict(entry), sort_keys=True, default=str)
        return TrackerReport(name, where, error=f"{type(exc).__name__}: {str(exc)[:300]}")


def read_trackers(handle: RunHandle) -> list[TrackerReport]:
    """A report from every tracker of the run, in the handle's order (read concurrently)."""
    items = list(handle.backends.items())
    with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        futures = [pool.submit(_read_one, name, entry, handle) for name, entry in items]
        return [f.result() for f in futures]
