"""Errors a user can act on: each says what went wrong, where, and what to do."""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence


class WarnOnce:
    """Says each kind of trouble once (per run, per process, per plugin: whoever holds it):
    a warning repeated at every call is noise that hides the next one."""

    def __init__(self, logger: logging.Logger) -> None:
        self.log = logger
        self.said: set[Hashable] = set()

    def __call__(self, kind: Hashable, msg: str, *args: object, level: int = logging.WARNING) -> bool:
        """Log ``msg % args`` at ``level`` the first time ``kind`` comes; True then."""
        if kind in self.said:
            return False
        self.said.add(kind)
        self.log.log(level, msg, *args)
        return True


class TrackingError(Exception):
    """Base class of tracking-core's errors."""


class UnknownBackend(TrackingError, ValueError):
    def __init__(
        self,
        name: str,
        installed: Sequence[str],
        failed: Sequence[str] = (),
        source: str = "--tracking-backends or TRACKING_CORE_BACKENDS",
    ) -> None:
        import difflib

        self.name = name
        self.installed = list(installed)
        listed = ", ".join(self.installed) or "none"
        close = difflib.get_close_matches(name, self.installed, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        msg = f"unknown tracking backend {name!r} (from {source}){hint} Installed backends: {listed}"
        if failed:
            msg += (
                f". Plugins that failed to load: {', '.join(failed)} "
                "(see `tracking-core plugins`)"
            )
        super().__init__(msg)


class BackendUnavailable(TrackingError, ImportError):
    def __init__(
        self, name: str, missing: Sequence[str], extra: str | None, hint: str | None = None
    ) -> None:
        self.name = name
        self.missing = list(missing)
        self.extra = extra
        # ``hint``: the command that installs it (BackendSpec.install_command)
        hint = hint or (
            f'pip install "tracking-core[{extra}]"' if extra else f"pip install {' '.join(missing)}"
        )
        super().__init__(
            f"tracking backend {name!r} needs {', '.join(missing)}, which is not installed: {hint}"
        )


class PluginLoadError(TrackingError):
    """A plugin could not be loaded; raised only when the user selects one of its backends."""


class RunNotOpenYet(TrackingError, RuntimeError):
    """Raised by a secondary's ``attach_run`` while the primary has not opened the job's run in
    that tracker yet. Not a failure: the attach is tried again shortly, records wait in the
    journal, and nothing is reported unless it lasts."""
