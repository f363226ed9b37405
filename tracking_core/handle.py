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
from .names import path_part

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
        for required in ("run_id", "tracking_dir"):
            if not isinstance(data.get(required), str) or not data[required]:
                found = "missing" if required not in data else f"{data[required]!r}"
                raise malformed(f"{required!r} must be a non-empty string ({found})")
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
            raise malformed(f"{type(exc).__name__}: {exc}") from exc

    @classmethod
    def parse(cls, value: RunHandle | Mapping[str, Any] | str | os.PathLike[str]) -> RunHandle:
        """A handle from a handle, a mapping, its JSON, or the path of a saved ``handle.json``
        (or of the run folder holding it). Anything else is one ``ValueError`` that says the
        handle is malformed and what a handle looks like."""
        if isinstance(value, RunHandle):
            return value
        if isinstance(value, Mapping):
            return cls.from_mapping(value)
        if not isinstance(value, (str, os.PathLike)):
            raise malformed(f"a {type(value).__name__}, not its JSON or a path")
        text = os.fspath(value)
        if not isinstance(text, str):
            raise malformed("a bytes path; pass it as str")
        if not text.strip():
            raise malformed("an empty string")
        data = _json_object(text)
        if data is not None:
            return cls.from_mapping(data)
        if text.lstrip()[0] in "{[\"":
            raise malformed(_not_an_object(text))
        return cls.from_mapping(_read_saved(Path(text)))

    @property
    def run_dir(self) -> Path:
        """``<tracking_dir>/runs/<run id>``, the run id as a file name (:mod:`tracking_core.names`)."""
        return Path(self.tracking_dir) / "runs" / path_part(self.run_id, "run id")

    def save(self) -> Path:
        """Write ``handle.json`` into the run directory (atomically) and return its path."""
        path = self.run_dir / HANDLE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, json.dumps(asdict(self), indent=2, sort_keys=True))
        return path


def malformed(why: str) -> ValueError:
    """The one error for a handle that cannot be used: why, and what a handle looks like."""
    return ValueError(
        f"malformed tracking-core run handle: {why}; a handle is the JSON that "
        f"Run.handle.to_json() produced (set in ${RUN_ENV} by start_run), or the path of a saved "
        f"{HANDLE_FILE}, like {EXAMPLE}"
    )


def _json_object(text: str) -> Mapping[str, Any] | None:
    """``text`` as a JSON object, or None when it is not one."""
    try:
        data = json.loads(text)
    except ValueError:  # JSONDecodeError, or a number too long to convert
        return None
    return data if isinstance(data, Mapping) else None


def _not_an_object(text: str) -> str:
    try:
        data = json.loads(text)
    except ValueError as exc:
        return f"not valid JSON ({exc})"
    return f"a JSON {type(data).__name__}, not an object"


def _read_saved(path: Path) -> Mapping[str, Any]:
    """The JSON object saved at ``path`` (a ``handle.json``, or the folder holding one)."""
    if path.is_dir():
        path = path / HANDLE_FILE
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise malformed(f"neither a handle's JSON nor a readable saved handle ({path}: {why})") from exc
    data = _json_object(text)
    if data is None:
        raise malformed(f"{path} holds no handle: {_not_an_object(text)}")
    return data


def find_handle(handle: Any = None, args: Any = None) -> RunHandle | None:
    """The handle from, in order: the explicit value, ``args.tracking_run``, ``$TRACKING_CORE_RUN``.
    A malformed one is a ``ValueError`` that names where it came from."""
    sources = (("handle=", handle), (f"args.{ARGS_ATTR}", getattr(args, ARGS_ATTR, None)), (f"${RUN_ENV}", settings.get(RUN_ENV)))
    for source, value in sources:
        if value:
            try:
                return RunHandle.parse(value)
            except ValueError as exc:
                raise ValueError(f"{source} {value!r:.80}: {exc}") from exc
    return None
