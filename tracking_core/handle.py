"""The run handle: what a process needs to attach to the job's run.

Small and JSON-serialisable. It travels to workers as the ``TRACKING_CORE_RUN`` environment
variable, as an attribute of the host's args (slime pickles ``args`` into Ray actors), or as an
explicit argument, and is saved under ``<tracking_dir>/runs/<run_id>/handle.json`` for resume.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import settings
from .files import replace_text

RUN_ENV = settings.RUN
ARGS_ATTR = "tracking_run"
HANDLE_FILE = "handle.json"


EXAMPLE = '{"run_id": "20261201-101500-1a2b3c", "name": "...", "tracking_dir": "/abs/tracking-runs", "backends": {"mlflow": {...}}}'


@dataclass
class RunHandle:
    """``backends`` maps each backend of the run to what ``attach_run`` needs: its target (where
    the run goes, known at start) until the primary has opened it there, then its open result.
    ``pending`` names the backends the primary has not opened the run in yet."""

    run_id: str
    name: str
    tracking_dir: str
    key_style: str = "default"
    backends: dict[str, dict[str, Any]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    version: int = 2

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RunHandle:
        try:
            backends = {str(k): dict(v) for k, v in dict(data.get("backends") or {}).items()}
            pending = [str(p) for p in data.get("pending") or []]
            for name, entry in backends.items():  # a handle written before targets existed
                if entry.get("pending") is True:
                    entry.pop("pending")
                    if name not in pending:
                        pending.append(name)
            return cls(
                run_id=str(data["run_id"]),
                name=str(data.get("name") or data["run_id"]),
                tracking_dir=str(data["tracking_dir"]),
                key_style=str(data.get("key_style") or "default"),
                backends=backends,
                options=dict(data.get("options") or {}),
                pending=pending,
                version=int(data.get("version", 2)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(
                f"malformed tracking-core run handle ({type(exc).__name__}: {exc}); a handle is "
                f"the JSON that Run.handle.to_json() produced (set in ${RUN_ENV} by start_run), "
                f"like {EXAMPLE}"
            ) from exc

    @classmethod
    def parse(cls, value: RunHandle | Mapping[str, Any] | str | os.PathLike[str]) -> RunHandle:
        """A handle from a handle, a mapping, its JSON, or the path of a saved ``handle.json``."""
        if isinstance(value, RunHandle):
            return value
        if isinstance(value, Mapping):
            return cls.from_mapping(value)
        text = os.fspath(value)
        if not text.lstrip().startswith("{"):
            path = Path(text)
            if path.is_dir():
                path = path / HANDLE_FILE
            try:
                text = path.read_text()
            except OSError as exc:
                raise ValueError(f"cannot read run handle {path}: {exc}") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"malformed tracking-core run handle: not valid JSON ({exc}); a handle is the "
                f"JSON that Run.handle.to_json() produced, like {EXAMPLE}"
            ) from exc
        if not isinstance(data, Mapping):
            raise ValueError(
                f"malformed tracking-core run handle: a JSON {type(data).__name__}, not an "
                f"object; a handle looks like {EXAMPLE}"
            )
        return cls.from_mapping(data)

    @property
    def run_dir(self) -> Path:
        return Path(self.tracking_dir) / "runs" / self.run_id

    def save(self) -> Path:
        """Write ``handle.json`` into the run directory (atomically) and return its path."""
        path = self.run_dir / HANDLE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, json.dumps(asdict(self), indent=2, sort_keys=True))
        return path


def find_handle(handle: Any = None, args: Any = None) -> RunHandle | None:
    """The handle from, in order: the explicit value, ``args.tracking_run``, ``$TRACKING_CORE_RUN``."""
    for value in (handle, getattr(args, ARGS_ATTR, None), settings.get(RUN_ENV)):
        if value:
            return RunHandle.parse(value)
    return None
