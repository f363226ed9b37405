"""Reading a run back from where it was logged: ``tracking-core show RUN``.

A run is found by its saved handle (:mod:`tracking_core.saved_runs`), which names every tracker
of the run and where its data went. The configs of every namespace are read from the run
directory (tracking-core keeps each one losslessly there, whatever the trackers), and each
tracker of the run is asked what it holds by its views (:meth:`~tracking_core.views.Views.read`),
which read it with the tracker's own client, so what is shown is what that tracker will show. The trackers
are read concurrently; one that cannot be read (library missing, server down) is reported on
its line, and the others are still read. A tracker whose views have no reader is listed with
where its data went. A run of a tracker's own files that has no saved handle is shown by the
views that know it (:func:`show_run_files`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from .handle import RunHandle
from .plugins import get_plugin_manager
from .views import TrackerReport

__all__ = ["SavedConfig", "read_configs", "read_trackers", "show_run_files"]


class SavedConfig(NamedTuple):
    """A namespace's saved config as ``show`` prints it: its ``values`` without the tracking
    options left unset, and how many of those the saved JSON also holds (``hidden``)."""

    values: dict[str, Any]
    hidden: int


def read_configs(handle: RunHandle) -> dict[str, SavedConfig]:
    """Each namespace's saved config (``launch``, ``actor``, ...), as logged."""
    from .config.shaping import shown_values

    out: dict[str, SavedConfig] = {}
    for path in sorted((handle.run_dir / "config").glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("values"), dict):
            values = shown_values(doc["values"], doc.get("report") if isinstance(doc.get("report"), dict) else None)
            out[str(doc.get("namespace") or path.stem)] = SavedConfig(values, len(doc["values"]) - len(values))
    return out


def _install_command(tracker: str, exc: ImportError) -> str:
    """What installs the reader of ``tracker``: the extra of the plugin that offers it (the
    packages named), else the missing module as a package."""
    missing = [exc.name] if exc.name else []
    spec = get_plugin_manager().backends.get(tracker)
    if spec is not None and spec.extra:
        return spec.install_command(missing)
    return f"pip install {' '.join(missing) or tracker}"


def _read_one(name: str, entry: Mapping[str, Any], handle: RunHandle) -> TrackerReport:
    where = json.dumps(dict(entry), sort_keys=True, default=str)
    try:
        report = get_plugin_manager().views(name).read(entry, handle)
    except ImportError as exc:
        return TrackerReport(name, where, error=f"{exc}; to read it here: {_install_command(name, exc)}")
    except Exception as exc:  # noqa: BLE001 - one tracker's failure is its own line
        return TrackerReport(name, where, error=f"{type(exc).__name__}: {str(exc)[:300]}")
    return report or TrackerReport(name, where, detail="no local reader")


def read_trackers(handle: RunHandle) -> list[TrackerReport]:
    """A report from every tracker of the run, in the handle's order (read concurrently)."""
    items = list(handle.backends.items())
    with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        futures = [pool.submit(_read_one, name, entry, handle) for name, entry in items]
        return [f.result() for f in futures]


def show_run_files(run: str, tracking_dir: str, limit: int) -> list[str] | None:
    """The lines of the first backend whose views know ``run`` as a run of their own files
    (:meth:`~tracking_core.views.Views.show_files`); None when none does."""
    for spec in get_plugin_manager().backends.values():
        lines = spec.views.show_files(run, tracking_dir, limit)
        if lines is not None:
            return [str(line) for line in lines]
    return None
