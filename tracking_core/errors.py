"""Errors a user can act on: each says what went wrong, where, and what to do."""

from __future__ import annotations

from collections.abc import Sequence


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
