"""The run handle: what a process needs to attach to the job's run.

Small and JSON-serialisable. It travels to workers as the ``TRACKING_CORE_RUN`` environment
variable, as an attribute of the host's args (slime pickles ``args`` into Ray actors), or as an
explicit argument, and is saved under ``<tracking_dir>/runs/<run_id>/handle.json`` for resume.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RUN_ENV = "TRACKING_CORE_RUN"
ARGS_ATTR = "tracking_run"
HANDLE_FILE = "handle.json"


@dataclass
class RunHandle:
    """``backends`` maps each backend of the run to what ``attach_run`` needs (its open result)."""

    run_id: str
    name: str
    tracking_dir: str
    key_style: str = "default"
    backends: dict[str, dict[str, Any]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    version: int = 1

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RunHandle:
        try:
            return cls(
                run_id=str(data["run_id"]),
                name=str(data.get("name") or data["run_id"]),
                tracking_dir=str(data["tracking_dir"]),
                key_style=str(data.get("key_style") or "default"),
                backends={str(k): dict(v) for k, v in dict(data.get("backends") or {}).items()},
                options=dict(data.get("options") or {}),
                version=int(data.get("version", 1)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"not a tracking-core run handle ({exc}); expected the JSON that "
                f"Run.handle.to_json() produced, e.g. from ${RUN_ENV}"
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
            raise ValueError(f"run handle is not valid JSON: {exc}") from exc
        return cls.from_mapping(data)

    @property
    def run_dir(self) -> Path:
        return Path(self.tracking_dir) / "runs" / self.run_id

    def save(self) -> Path:
        """Write ``handle.json`` into the run directory (atomically) and return its path."""
        path = self.run_dir / HANDLE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True))
        os.replace(tmp, path)
        return path


def find_handle(handle: Any = None, args: Any = None) -> RunHandle | None:
    """The handle from, in order: the explicit value, ``args.tracking_run``, ``$TRACKING_CORE_RUN``."""
    for value in (handle, getattr(args, ARGS_ATTR, None), os.environ.get(RUN_ENV)):
        if value:
            return RunHandle.parse(value)
    return None


def attach_arguments(handle: RunHandle, name: str) -> Callable[[], dict[str, Any]]:
    """The ``attach_run`` arguments for backend ``name``, re-reading the saved handle while the
    primary has not been able to open the run there yet (its entry is ``{"pending": true}``)."""

    def kwargs() -> dict[str, Any]:
        entry = handle.backends.get(name) or {}
        if entry.get("pending"):
            try:
                entry = RunHandle.parse(handle.run_dir).backends.get(name) or {}
            except ValueError:
                entry = {"pending": True}
            if entry.get("pending"):
                raise RuntimeError(
                    f"the run is not open in {name!r} yet (the primary could not reach it); "
                    "records are kept in the journal meanwhile"
                )
            handle.backends[name] = entry
        return {"attach": entry}

    return kwargs
