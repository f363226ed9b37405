"""Looking at a run: the viewer each of its trackers has, and the commands that open them.

``tracking-core ui RUN`` starts the local viewers a run's trackers offer (each backend's views
say what: :meth:`~tracking_core.views.Views.viewer`), each on a free port, waits until each
answers over HTTP, prints their URLs and stops them on Ctrl-C. :func:`where_to_look` says in words
where each tracker's data is (the run's start line, the demo's closing lines) and
:func:`sync_lines` how to upload what a tracker keeps only here (the end of the run). The core
names no tracker: a backend whose views say nothing is shown by its entry in the run handle.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from .handle import RunHandle
from .names import path_part
from .plugins import get_plugin_manager
from .views import Viewer

__all__ = ["log_dir", "plan_viewers", "serve", "sync_lines", "viewer_ports", "where_to_look"]

log = logging.getLogger("tracking_core.viewers")


def _said(handle: RunHandle, method: str, unsaid: Callable[[str, Mapping[str, Any]], list[str]]) -> list[str]:
    """The lines of the views' ``method`` of every tracker of the run (``unsaid(name, entry)``
    where they say nothing); views that raise cost their own lines only, said in their place."""
    lines = []
    for name, entry in handle.backends.items():
        ask = getattr(get_plugin_manager().views(name), method)
        try:
            said = ask(entry, handle)
        except Exception as exc:  # noqa: BLE001 - one plugin's fault is its own line
            log.debug("the views of %r raised", name, exc_info=True)
            said = [f"{name}: (its views raised {type(exc).__name__}: {exc})"]
        lines += unsaid(name, entry) if said is None else [str(line) for line in said]
    return lines


def where_to_look(handle: RunHandle) -> list[str]:
    """One line per tracker of the run: where its data is and the command that shows it (its
    views' ``location``; the entry of the run handle where they say nothing)."""
    return _said(handle, "location", lambda name, entry: [f"{name}: {dict(entry)}" if entry else name])


def sync_lines(handle: RunHandle) -> list[str]:
    """How to upload what the run's trackers keep only on this machine (their views' ``sync``);
    empty when nothing waits."""
    return _said(handle, "sync", lambda name, entry: [])


def viewer_ports() -> dict[str, int]:
    """Backend name -> the port its local viewer prefers, for every installed backend that
    declares one (``viewer_port`` in its registration): ``tracking-core ui`` gets a
    ``--<name>-port`` option for each."""
    specs = get_plugin_manager().backends
    return {name: int(spec.viewer_port) for name, spec in specs.items() if spec.viewer_port}


def _free_port(host: str, preferred: int, taken: set[int]) -> int:
    for port in range(preferred, preferred + 100):
        if port in taken:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                continue
        return port
    raise OSError(f"no free port on {host} in {preferred}..{preferred + 99}")


def _viewer(name: str, entry: Mapping[str, Any], handle: RunHandle, host: str, port: int | None, dry_run: bool) -> Viewer:
    try:
        viewer = get_plugin_manager().views(name).viewer(entry, handle, host, port, dry_run)
    except Exception as exc:  # noqa: BLE001 - one plugin's fault is its own line
        return Viewer(name, note=f"no viewer: its views raised {type(exc).__name__}: {exc}")
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
    # Imported here: the run's start line (where_to_look) imports this module, and
    # urllib.request (http.client, ssl, email) would cost every training process's first start.
    import urllib.error
    import urllib.request

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


def _failed(viewer: Viewer, log_path: Path, what: str) -> int:
    """Say on stderr that ``viewer`` failed, with the last 20 lines of its log, indented."""
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-20:]
        tail = "\n".join(f"  {line}" for line in lines) or "  (its log is empty)"
    except OSError as exc:
        tail = f"  (its log cannot be read: {exc})"
    print(f"tracking-core ui: the {viewer.note} {what}; its log: {log_path}, ending with:\n{tail}", file=sys.stderr)
    return 1


def log_dir(handle: RunHandle) -> Path:
    """Where ``ui`` keeps its viewers' own output (their access lines, warnings): ``ui-logs`` in
    the run directory, else a new temporary directory where that cannot be written."""
    path = handle.run_dir / "ui-logs"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        import tempfile

        return Path(tempfile.mkdtemp(prefix="tracking-core-ui-"))
    return path


def serve(viewers: Sequence[Viewer], *, out: TextIO, logs: Path, wait: float = 120.0) -> int:
    """Start every viewer that has a command, print its URL once it answers, and keep them
    running until Ctrl-C (or SIGTERM), then stop them. A viewer's own output goes to
    ``<logs>/<tracker>.log`` (said once on ``out`` after the URLs), never to the terminal. Returns 0, or 1 when
    a viewer exits or does not answer within ``wait`` seconds (said on stderr with its log's
    path and last lines)."""
    for viewer in viewers:
        if viewer.command is None:
            print(f"{viewer.tracker}: {viewer.url or viewer.note}", file=out, flush=True)
    startable = [v for v in viewers if v.command is not None]
    if not startable:
        return 0
    procs: list[subprocess.Popen[bytes]] = []
    log_paths = [logs / f"{path_part(v.tracker, 'viewer')}.log" for v in startable]
    stopping = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    # Ctrl-C and SIGTERM both stop the viewers: our own handler for SIGINT too, since a process
    # started in the background of a script inherits SIGINT ignored (and Python then raises no
    # KeyboardInterrupt).
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for viewer, log_path in zip(startable, log_paths, strict=True):
            assert viewer.command is not None
            with log_path.open("wb") as log_file:  # the child keeps its own descriptor
                procs.append(
                    subprocess.Popen(
                        viewer.command,
                        env={**os.environ, **viewer.env},
                        stdout=log_file,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,  # a process group to stop as one
                    )
                )
        pending = dict(enumerate(startable))
        deadline = time.monotonic() + wait
        while pending and not stopping:
            for i, viewer in list(pending.items()):
                code = procs[i].poll()
                if code is not None:
                    return _failed(viewer, log_paths[i], f"exited with code {code}")
                if viewer.ready and _answers(viewer.ready):
                    print(f"{viewer.tracker}: {viewer.url}  ({viewer.note})", file=out, flush=True)
                    del pending[i]
            if pending and time.monotonic() > deadline:
                for i, viewer in pending.items():
                    _failed(viewer, log_paths[i], f"did not answer within {wait:.0f} s")
                return 1
            time.sleep(0.3)
        if not stopping:
            print(f"the viewers' logs: {logs}\nCtrl-C stops them.", file=out, flush=True)
        while not stopping:
            for viewer, proc, log_path in zip(startable, procs, log_paths, strict=True):
                if proc.poll() is not None:
                    return _failed(viewer, log_path, f"exited with code {proc.returncode}; the others are stopped")
            time.sleep(0.3)
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop(procs)
