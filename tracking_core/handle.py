"""The run handle: what a process needs to attach to the job's run.

Small and JSON-serialisable. :meth:`RunHandle.to_json` is the one value a process on any node
needs: it travels to workers as the ``TRACKING_CORE_RUN`` environment variable, as an attribute
of the host's args (slime pickles ``args`` into Ray actors), or as an explicit argument, and the
primary saves it under ``<tracking_dir>/runs/<run_id>/handle.json`` for resume. It carries the
run's identity and each tracker's target; the primary's tracking directory and host travel in
it as information only: every process writes under its own tracking directory
(:func:`local_tracking_dir`), and a value of the handle that lies under the
primary's directory is read as lying under the process's own (:func:`rebase`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
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


EXAMPLE = '{"run_id": "20261201-101500-1a2b3c", "name": "...", "tracking_dir": "/abs/tracking-runs", "host": "node0", "backends": {"<tracker>": {...}}}'


@dataclass
class RunHandle:
    """``backends`` maps each backend of the run to what ``attach_run`` needs: its target (where
    the run goes, known at start) until the primary has opened it there, then its open result.
    ``pending`` names the backends the primary has not opened the run in yet. ``tracking_dir``
    and ``host`` are the primary's (``socket.gethostname()``): the directory is the primary's
    disk, meaningful on that host only. A handle without ``host`` (saved before it existed) is
    taken as made on this host."""

    run_id: str
    name: str
    tracking_dir: str
    key_style: str = "default"
    backends: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    host: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RunHandle:
        for required in ("run_id", "tracking_dir"):
            if not isinstance(data.get(required), str) or not data[required]:
                found = "missing" if required not in data else f"{data[required]!r}"
                raise malformed(f"{required!r} must be a non-empty string ({found})")
        try:
            return cls(
                run_id=str(data["run_id"]),
                name=str(data.get("name") or data["run_id"]),
                tracking_dir=str(data["tracking_dir"]),
                key_style=str(data.get("key_style") or "default"),
                backends={str(k): dict(v) for k, v in dict(data.get("backends") or {}).items()},
                pending=[str(p) for p in data.get("pending") or []],
                host=str(data.get("host") or ""),
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
        if isinstance(data, Mapping):
            return cls.from_mapping(data)
        if text.lstrip()[0] in "{[\"":
            raise malformed(data)
        return cls.from_mapping(_read_saved(Path(text)))

    @property
    def run_dir(self) -> Path:
        """``<tracking_dir>/runs/<run id>``, the run id as a file name (:mod:`tracking_core.names`):
        the primary's run folder (on the primary's host)."""
        return run_folder(self.tracking_dir, self.run_id)

    def on_primary_host(self) -> bool:
        """Whether this process runs on the primary's host (a handle without a host: yes)."""
        return not self.host or self.host == socket.gethostname()

    def rebased(self, tracking_dir: str | os.PathLike[str]) -> RunHandle:
        """A copy whose backends' values under the primary's tracking directory lie under
        ``tracking_dir`` instead (see :func:`rebase`); the same handle when the two are one."""
        new = os.fspath(tracking_dir)
        if os.path.normpath(new) == os.path.normpath(self.tracking_dir):
            return self
        backends = {name: rebase(entry, self.tracking_dir, new) for name, entry in self.backends.items()}
        return RunHandle(**{**asdict(self), "backends": backends})

    def save(self, *, if_absent: bool = False) -> Path:
        """Write ``handle.json`` into the run directory (atomically) and return its path; with
        ``if_absent``, only where there is none (a handle saved meanwhile is kept whole)."""
        path = self.run_dir / HANDLE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(asdict(self), indent=2, sort_keys=True)
        if not if_absent:
            replace_text(path, text)
            return path
        tmp = path.with_name(f".{HANDLE_FILE}.new{os.getpid()}-{threading.get_ident()}")
        try:
            tmp.write_text(text)
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)  # never over a handle another process saved
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        return path


def run_folder(tracking_dir: str | os.PathLike[str], run_id: str) -> Path:
    """``<tracking_dir>/runs/<run id>``: where a run's handle, configs and delivery logs go."""
    return Path(tracking_dir) / "runs" / path_part(run_id, "run id")


def rebase(value: Any, old: str, new: str) -> Any:
    """``value`` (a string, or lists and mappings of them) with every path under ``old`` moved
    under ``new``: ``old`` itself, ``old/...``, and ``old`` after a URI's scheme
    (``sqlite:////old/mlflow/mlflow.db``). Nothing tracker-specific: a target that names a file
    under the primary's tracking directory names the same file under this process's."""
    if isinstance(value, str):
        old, new = old.rstrip("/"), new.rstrip("/") or "/"
        if not old:  # the root: nothing to move
            return value
        # The first ``old`` that is a whole path: at the start or after "/" or ":", and at the
        # end or before "/", "?" or "#".
        whole_path = rf"(?:^|(?<=[/:])){re.escape(old)}(?=[/?#]|\Z)"
        return re.sub(whole_path, lambda _: new, value, count=1)
    if isinstance(value, Mapping):
        return {k: rebase(v, old, new) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rebase(v, old, new) for v in value]
    return value


def malformed(why: str) -> ValueError:
    """The one error for a handle that cannot be used: why, and what a handle looks like."""
    return ValueError(
        f"malformed tracking-core run handle: {why}; a handle is the JSON that "
        f"Run.handle.to_json() produced (set in ${RUN_ENV} by start_run), or the path of a saved "
        f"{HANDLE_FILE}, like {EXAMPLE}"
    )


def _json_object(text: str) -> Mapping[str, Any] | str:
    """``text`` as a JSON object, or why it is not one."""
    try:
        data = json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or a number too long to convert
        return f"not valid JSON ({exc})"
    return data if isinstance(data, Mapping) else f"a JSON {type(data).__name__}, not an object"


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
    if isinstance(data, str):
        raise malformed(f"{path} holds no handle: {data}")
    return data


def find_handle(handle: Any = None, args: Any = None) -> RunHandle | None:
    """The handle from, in order: the explicit value, ``args.tracking_run``, ``$TRACKING_CORE_RUN``.
    A malformed one is a ``ValueError`` that names where it came from."""
    found = find_handle_source(handle, args)
    return found[0] if found is not None else None


def find_handle_source(handle: Any = None, args: Any = None) -> tuple[RunHandle, str] | None:
    """:func:`find_handle` and where the handle came from (``handle=``, ``args.tracking_run``
    or ``$TRACKING_CORE_RUN``)."""
    sources = (("handle=", handle), (f"args.{ARGS_ATTR}", getattr(args, ARGS_ATTR, None)), (f"${RUN_ENV}", settings.get(RUN_ENV)))
    for source, value in sources:
        if value:
            try:
                return RunHandle.parse(value), source
            except ValueError as exc:
                raise ValueError(f"{source} {value!r:.80}: {exc}") from exc
    return None


def local_tracking_dir(
    handle: RunHandle | None, args: Any = None, explicit: str | os.PathLike[str] | None = None
) -> Path:
    """This process's own tracking directory for ``handle``'s run, absolute: where it journals,
    saves configs and keeps local trackers' files. ``explicit`` (``tracking_dir=``), else
    ``$TRACKING_CORE_DIR`` of this process, else (on the primary's host) the primary's
    directory, else ``args.tracking_dir`` (``--tracking-dir``), else ``./tracking-runs`` of the
    working directory. Never a path only another node has: the handle's directory counts only
    on the host that made it."""
    return local_tracking_dir_source(handle, args, explicit)[0]


def local_tracking_dir_source(handle: RunHandle | None, args: Any, explicit: str | os.PathLike[str] | None) -> tuple[Path, str]:
    """:func:`local_tracking_dir` and what chose it (said where it matters)."""
    primary_dir = handle.tracking_dir if handle is not None and handle.on_primary_host() else None
    for value, source in (
        (explicit, "tracking_dir="),
        (settings.get(settings.DIR), f"${settings.DIR}"),
        (primary_dir, "the run handle (on the primary's host)"),
        (getattr(args, "tracking_dir", None), "--tracking-dir"),
    ):
        if value:
            return Path(value).absolute(), source
    return Path(settings.DEFAULT_TRACKING_DIR).absolute(), "the default (./tracking-runs)"
