"""Looking at a run: the viewer each of its trackers has, and the commands that open them.

``tracking-core ui RUN`` starts the local viewers a run needs — the MLflow UI on the run's
tracking store (unless that store is a server, which has its own UI) and TensorBoard on the run's
log directory — waits until each answers over HTTP, prints their URLs and stops them on Ctrl-C.
:func:`where_to_look` says the same in words (the demo's closing lines, ``tracking-core show``).

Commands are printed so that they run as printed from any directory: a tool that is not on
``PATH`` (the project's virtual environment not activated) is named by its full path.
"""

from __future__ import annotations

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

__all__ = ["Viewer", "plan_viewers", "runnable", "serve", "wandb_sync_command", "where_to_look"]

#: Trackers whose viewer ``tracking-core ui`` can start, and the port each prefers.
DEFAULT_PORTS = {"mlflow": 5000, "tensorboard": 6006}


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


def wandb_sync_command(entry: Mapping[str, Any]) -> str:
    """The ``wandb sync`` command for an offline W&B run (every process's directory of it).

    Offline, each writing process keeps its own directory under the same run id (see the W&B
    backend); ``wandb sync`` given several directories of one run id uploads them one after
    another in order of their start time, whatever order they are named in, so one glob that
    matches them all is the whole instruction.
    """
    base = Path(str(entry.get("dir") or ".")) / "wandb"
    return f"{runnable('wandb')} sync {base}/offline-run-*-{entry.get('id')}*"


def where_to_look(handle: RunHandle) -> list[str]:
    """One line per tracker of the run: where its data is and the command that shows it."""
    lines = []
    for name, entry in handle.backends.items():
        if name == "mlflow":
            uri = str(entry.get("tracking_uri", ""))
            which = entry.get("run_id") or f"tagged tracking_core.run_id={handle.run_id}"
            if uri.startswith(("http://", "https://")):
                lines.append(f"MLflow run {which}: {_mlflow_run_url(uri, entry)}")
            else:
                lines.append(
                    f"MLflow run {which} in {uri}: "
                    f"{runnable('mlflow')} ui --backend-store-uri {uri}"
                )
        elif name == "tensorboard":
            lines.append(
                f"TensorBoard: {runnable('tensorboard')} --logdir {entry.get('logdir')}"
            )
        elif name == "wandb":
            if entry.get("mode") == "offline":
                lines.append(
                    f"W&B offline run {entry.get('id')}: upload it with {wandb_sync_command(entry)}"
                    f"{_on_host(handle)}"
                )
                lines.append(f"  {_OTHER_NODES} {wandb_sync_command({**entry, 'dir': '$TRACKING_CORE_DIR'})}")
            else:
                lines.append(f"W&B run {entry.get('id')} in project {entry.get('project')}")
        elif name == "jsonl":
            lines.append(f"jsonl: {entry.get('dir')}")
        elif name == "swanlab":
            lines += _swanlab_lines(entry)
        elif name == "trackio":
            from tracking_trackio.options import show_command

            lines.append(f"trackio project {entry.get('project')}: {show_command(entry)}")
        elif name == "console":
            continue  # its lines were on the terminal
        else:
            lines.append(f"{name}: {dict(entry)}" if entry else name)
    return lines


#: Offline W&B keeps one directory per writing process on the disk of the node it ran on.
_OTHER_NODES = (
    "and on every other node that ran a writer of the job, in its own tracking directory "
    "($TRACKING_CORE_DIR there, else ./tracking-runs of the writer's working directory):"
)


def _on_host(handle: RunHandle) -> str:
    """`` (on <host>)`` where the handle says which host made it."""
    return f" (on {handle.host})" if getattr(handle, "host", "") else ""


def _swanlab_lines(entry: Mapping[str, Any]) -> list[str]:
    mode, log_dir = entry.get("mode"), entry.get("log_dir")
    if mode == "online":
        return [f"SwanLab experiment {entry.get('id')}: {entry.get('url') or entry.get('project')}"]
    if mode == "local":
        return [f"SwanLab (local): {runnable('swanlab')} watch {log_dir}   (needs swanlab[dashboard])"]
    # Offline: one directory per writer, uploaded into one experiment (the plugin's rule).
    from tracking_swanlab.options import BANNER_NOTE, sync_commands

    commands = sync_commands(str(log_dir), str(entry.get("id"))) if log_dir else []
    head = f"SwanLab offline run {entry.get('id')} in {log_dir}: upload it with"
    tool = runnable("swanlab")
    return [head] + [f"  {tool}{c[len('swanlab'):]}" for c in commands] + [f"  ({BANNER_NOTE})"]


def _mlflow_run_url(base: str, entry: Mapping[str, Any]) -> str:
    url = base.rstrip("/") + "/"
    if entry.get("experiment_id") and entry.get("run_id"):
        url += f"#/experiments/{entry['experiment_id']}/runs/{entry['run_id']}"
    return url


@dataclass
class Viewer:
    """One tracker's viewer: ``command`` is what to start (None: nothing to start here, the
    ``url`` or ``note`` says where to look); ``ready`` is the URL that answers once it is up."""

    tracker: str
    url: str | None = None
    command: list[str] | None = None
    ready: str | None = None
    note: str = ""
    env: dict[str, str] = field(default_factory=dict)


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


def _mlflow_viewer(entry: Mapping[str, Any], host: str, port: int) -> Viewer:
    uri = str(entry.get("tracking_uri", ""))
    base = f"http://{host}:{port}"
    return Viewer(
        "mlflow",
        url=_mlflow_run_url(base, entry),
        command=[sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
                 "--host", host, "--port", str(port), "--workers", "1"],
        ready=f"{base}/health",
        note=f"MLflow UI on {uri}",
        env={"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},  # no job runner: starts in seconds
    )  # fmt: skip


def _tensorboard_viewer(entry: Mapping[str, Any], host: str, port: int) -> Viewer:
    logdir = str(entry.get("logdir"))
    base = f"http://{host}:{port}"
    return Viewer(
        "tensorboard",
        url=f"{base}/",
        command=[sys.executable, "-m", "tensorboard.main", "--logdir", logdir,
                 "--host", host, "--port", str(port)],
        ready=f"{base}/",
        note=f"TensorBoard on {logdir}",
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
    )  # fmt: skip


def _elsewhere(name: str, entry: Mapping[str, Any], handle: RunHandle) -> Viewer:
    """A tracker whose data is looked at without starting anything here."""
    if name == "mlflow":
        return Viewer(name, url=_mlflow_run_url(str(entry["tracking_uri"]), entry),
                      note="the MLflow server's own UI")  # fmt: skip
    if name == "wandb" and entry.get("mode") == "offline":
        return Viewer(name, note=f"offline: upload it with {wandb_sync_command(entry)}, then open it in W&B")
    if name == "wandb":
        return Viewer(name, note=f"run {entry.get('id')} in W&B project {entry.get('project')}")
    if name == "jsonl":
        return Viewer(name, note=f"{runnable('tracking-core')} show {handle.run_dir}")
    return Viewer(name, note=f"no viewer known; its entry in the run handle: {dict(entry)}")


def plan_viewers(
    handle: RunHandle,
    *,
    host: str = "127.0.0.1",
    ports: Mapping[str, int] | None = None,
    trackers: Iterable[str] | None = None,
) -> list[Viewer]:
    """The viewer of each tracker of the run (``trackers`` limits which), with free ports picked
    from ``ports`` (default :data:`DEFAULT_PORTS`, the next free one when taken)."""
    wanted = set(trackers) if trackers else None
    preferred = {**DEFAULT_PORTS, **(ports or {})}
    taken: set[int] = set()
    viewers = []
    for name, entry in handle.backends.items():
        if wanted is not None and name not in wanted:
            continue
        uri = str(entry.get("tracking_uri", ""))
        local = {"mlflow": _mlflow_viewer, "tensorboard": _tensorboard_viewer}.get(name)
        if local is None or uri.startswith(("http://", "https://")):
            viewers.append(_elsewhere(name, entry, handle))
            continue
        port = _free_port(host, preferred[name], taken)
        taken.add(port)
        viewers.append(local(entry, host, port))
    return viewers


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - our own localhost URL
            return 200 <= int(response.status) < 500
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _stop(procs: Sequence[subprocess.Popen[bytes]], timeout: float = 10.0) -> None:
    """Stop each viewer's whole process group (MLflow's server starts workers of its own)."""
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
