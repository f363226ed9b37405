"""Looking at a run: the viewer each of its trackers has, and the commands that open them.

``tracking-core ui RUN`` starts the local viewers a run's trackers offer (the tracker's plugin
says what: its ``tracker_viewer`` hook), each on a free port, waits until each answers over
HTTP, prints their URLs and stops them on Ctrl-C. :func:`where_to_look` says in words where each
tracker's data is (``tracker_location``: the run's start line, the demo's closing lines) and
:func:`sync_lines` how to upload what a tracker keeps only here (``tracker_sync``: the end of
the run). The core names no tracker: a backend no plugin answers for is shown by its entry in
the run handle.

Commands are printed so that they run as printed from any directory: a tool that is not on
``PATH`` (the project's virtual environment not activated) is named by its full path
(:func:`runnable`, which plugins use for their commands).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .handle import RunHandle

__all__ = ["Viewer", "ask", "plan_viewers", "runnable", "serve", "sync_lines", "viewer_ports", "where_to_look"]

log = logging.getLogger("tracking_core.viewers")


def runnable(tool: str) -> str:
    """``tool`` as a command that runs from any directory: the bare name when ``PATH`` finds the
    one installed beside this Python, else the full path of that one (the virtual environment
    need not be activated), else the bare name."""
    beside = Path(sys.executable).parent / tool
    if not beside.exists():
        return tool
    found = shutil.which(tool)
    if found and Path(found).resolve() == beside.resolve():
        return tool
    return str(beside)


def ask(hook: str, **kwargs: Any) -> Any:
    """The first answer (not None) of the plugins to ``hook`` (a ``firstresult`` hook), called
    through pluggy; what a plugin raises reaches the caller."""
    from .plugins import get_plugin_manager

    return getattr(get_plugin_manager().pm.hook, hook)(**kwargs)


def _said(hook: str, name: str, entry: Mapping[str, Any], handle: RunHandle) -> list[str] | None:
    """A plugin's lines for backend ``name`` (``tracker_location`` / ``tracker_sync``); a plugin
    that raises costs its own lines only, said in their place."""
    try:
        lines = ask(hook, backend=name, entry=entry, handle=handle)
    except Exception as exc:  # noqa: BLE001 - one plugin's fault is its own line
        log.debug("%s of %r raised", hook, name, exc_info=True)
        return [f"{name}: ({hook} raised {type(exc).__name__}: {exc})"]
    return None if lines is None else [str(line) for line in lines]


def where_to_look(handle: RunHandle) -> list[str]:
    """One line per tracker of the run: where its data is and the command that shows it (its
    plugin's ``tracker_location``; the entry of the run handle where no plugin answers)."""
    lines = []
    for name, entry in handle.backends.items():
        said = _said("tracker_location", name, entry, handle)
        if said is None:
            said = [f"{name}: {dict(entry)}" if entry else name]
        lines += said
    return lines


def sync_lines(handle: RunHandle) -> list[str]:
    """How to upload what the run's trackers keep only on this machine (each plugin's
    ``tracker_sync``); empty when nothing waits."""
    lines = []
    for name, entry in handle.backends.items():
        lines += _said("tracker_sync", name, entry, handle) or []
    return lines


@dataclass
class Viewer:
    """One tracker's viewer, as its plugin's ``tracker_viewer`` hook describes it: ``command``
    is what to start (None: nothing to start here, the ``url`` or ``note`` says where to look),
    with ``env`` added to the environment; ``url`` is what to open, ``ready`` the URL that
    answers once it is up; ``note`` says what it is (``<tracker> UI on <store>``); ``warning`` is
    said on stderr before it starts (what the plugin could not find, and what it opens instead)."""

    tracker: str
    url: str | None = None
    command: list[str] | None = None
    ready: str | None = None
    note: str = ""
    env: dict[str, str] = field(default_factory=dict)
    warning: str = ""


def viewer_ports() -> dict[str, int]:
    """Backend name -> the port its local viewer prefers, for every installed backend that
    declares one (``viewer_port`` in its registration): ``tracking-core ui`` gets a
    ``--<name>-port`` option for each."""
    from .plugins import get_plugin_manager

    specs = get_plugin_manager().backends
    return {name: int(spec.viewer_port) for name, spec in specs.items() if spec.viewer_port}


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _free_port(host: str, preferred: int, taken: set[int]) -> int:
    for port in range(preferred, preferred + 100):
        if port not in taken and _port_free(host, port):
            return port
    raise OSError(f"no free port on {host} in {preferred}..{preferred + 99}")


def _viewer(name: str, entry: Mapping[str, Any], handle: RunHandle, host: str, port: int | None, dry_run: bool) -> Viewer:
    try:
        viewer = ask("tracker_viewer", backend=name, entry=entry, handle=handle, host=host, port=port, dry_run=dry_run)
    except Exception as exc:  # noqa: BLE001 - one plugin's fault is its own line
        return Viewer(name, note=f"no viewer: tracker_viewer raised {type(exc).__name__}: {exc}")
    if viewer is None:
        return Viewer(name, note=f"no viewer known; its entry in the run handle: {dict(entry)}")
    return viewer


def plan_viewers(
    handle: RunHandle,
    *,
    host: str = "127.0.0.1",
    ports: Mapping[str, int] | None = None,
    trackers: Iterable[str] | None = None,
    dry_run: bool = False,
) -> list[Viewer]:
    """The viewer of each tracker of the run (``trackers`` limits which), each backend that
    declares a viewer port given a free one: from ``ports[name]``, else the port it declares,
    the next free one when taken."""
    wanted = set(trackers) if trackers else None
    preferred = {**viewer_ports(), **(ports or {})}
    taken: set[int] = set()
    viewers = []
    for name, entry in handle.backends.items():
        if wanted is not None and name not in wanted:
            continue
        port = _free_port(host, preferred[name], taken) if preferred.get(name) else None
        viewer = _viewer(name, entry, handle, host, port, dry_run)
        if port is not None and viewer.command is not None:
            taken.add(port)
        viewers.append(viewer)
    return viewers


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - our own localhost URL
            return 200 <= int(response.status) < 500
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _stop(procs: Sequence[subprocess.Popen[bytes]], timeout: float = 10.0) -> None:
    """Stop each viewer's whole process group (a viewer may start workers of its own)."""
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:  # not even SIGKILL took it (stuck in the kernel)
                print(f"tracking-core ui: process {proc.pid} does not stop; leaving it", file=sys.stderr)


def serve(viewers: Sequence[Viewer], *, out: TextIO, wait: float = 120.0) -> int:
    """Start every viewer that has a command, print its URL once it answers, and keep them
    running until Ctrl-C (or SIGTERM), then stop them. Returns 0, or 1 when a viewer exits or
    does not answer within ``wait`` seconds (its output, on stderr, says why)."""
    for viewer in viewers:
        if viewer.command is None:
            print(f"{viewer.tracker}: {viewer.url or viewer.note}", file=out, flush=True)
    startable = [v for v in viewers if v.command is not None]
    if not startable:
        return 0
    procs: list[subprocess.Popen[bytes]] = []
    stopping = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    # Ctrl-C and SIGTERM both stop the viewers: our own handler for SIGINT too, since a process
    # started in the background of a script inherits SIGINT ignored (and Python then raises no
    # KeyboardInterrupt).
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for viewer in startable:
            assert viewer.command is not None
            procs.append(
                subprocess.Popen(
                    viewer.command,
                    env={**os.environ, **viewer.env},
                    stdout=2,  # the viewers' own chatter goes to stderr; our stdout is the URLs
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # a process group to stop as one
                )
            )
        pending = dict(zip(range(len(startable)), startable, strict=True))
        deadline = time.monotonic() + wait
        while pending and not stopping:
            for i, viewer in list(pending.items()):
                code = procs[i].poll()
                if code is not None:
                    print(f"tracking-core ui: the {viewer.note} exited with code {code} "
                          "(its output is above)", file=sys.stderr)  # fmt: skip
                    return 1
                if viewer.ready and _answers(viewer.ready):
                    print(f"{viewer.tracker}: {viewer.url}  ({viewer.note})", file=out, flush=True)
                    del pending[i]
            if pending and time.monotonic() > deadline:
                names = ", ".join(v.note for v in pending.values())
                print(f"tracking-core ui: no answer from {names} after {wait:.0f} s", file=sys.stderr)
                return 1
            time.sleep(0.3)
        if not stopping:
            print("Ctrl-C stops them.", file=out, flush=True)
        while not stopping:
            for viewer, proc in zip(startable, procs, strict=True):
                if proc.poll() is not None:
                    print(f"tracking-core ui: the {viewer.note} exited with code "
                          f"{proc.returncode}; stopping the others", file=sys.stderr)  # fmt: skip
                    return 1
            time.sleep(0.3)
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop(procs)
