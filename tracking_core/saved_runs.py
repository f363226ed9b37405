"""Finding a run that was saved in a tracking directory: by its run directory, its
``handle.json``, its run id or a unique prefix of one, or the latest run.

Every command that reads a finished run (``show``, ``ui``) starts here, so a run is named the
same way everywhere.
"""

from __future__ import annotations

from pathlib import Path

from .errors import TrackingError
from .handle import HANDLE_FILE, RunHandle
from .names import path_part

__all__ = ["RunNotFound", "find_saved_run"]


class RunNotFound(TrackingError, FileNotFoundError):
    """No saved run matches what the user named; the message lists what there is."""


def _known(runs: Path) -> str:
    names = (
        sorted(p.name for p in runs.iterdir() if (p / HANDLE_FILE).is_file())
        if runs.is_dir()
        else []
    )
    if not names:
        return f"no saved runs under {runs}"
    shown = ", ".join(names[-5:])
    return f"runs under {runs}: {shown}" + (
        f" (and {len(names) - 5} more)" if len(names) > 5 else ""
    )


def _parse(path: Path) -> RunHandle:
    try:
        return RunHandle.parse(path)
    except ValueError as exc:  # said as one line by the CLI, like every TrackingError
        raise TrackingError(f"{path}: {exc}") from exc


def find_saved_run(run: str | None, tracking_dir: str | Path) -> RunHandle:
    """The saved handle of ``run``: a run directory, a ``handle.json``, a run id or a unique
    prefix of one under ``<tracking_dir>/runs``; None or ``""`` means the latest run there.

    Raises :class:`RunNotFound` (one line: what was looked for, where, and what exists), or
    :class:`~tracking_core.errors.TrackingError` for a handle file that cannot be read.
    """
    runs = Path(tracking_dir) / "runs"
    if not run:
        saved = list(runs.glob(f"*/{HANDLE_FILE}"))
        if not saved:
            raise RunNotFound(
                f"no saved runs under {runs} (name a run directory, or pass --tracking-dir)"
            )
        return _parse(max(saved, key=lambda p: p.stat().st_mtime))
    path = Path(run)
    if path.is_file() or (path / HANDLE_FILE).is_file():
        return _parse(path)
    named = runs / path_part(run, warn=False)
    if (named / HANDLE_FILE).is_file():
        return _parse(named)
    matches = (
        sorted(p for p in runs.glob(f"{run}*") if (p / HANDLE_FILE).is_file())
        if runs.is_dir() and "/" not in run
        else []
    )
    if len(matches) == 1:
        return _parse(matches[0])
    if len(matches) > 1:
        raise RunNotFound(
            f"run {run!r} is ambiguous: {', '.join(p.name for p in matches[:5])} match; "
            "give more of the run id"
        )
    raise RunNotFound(f"no saved run {run!r} (a run directory or run id); {_known(runs)}")
