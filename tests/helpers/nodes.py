"""Simulated nodes on one machine: each its own hostname, disk area, working directory and processes.

tracking-core tells nodes apart by ``socket.gethostname()`` and by where each process writes, so a
node is simulated by

* a **UTS namespace** of its own with the node's hostname (``unshare --uts`` + ``hostname``; needs
  root, as CI has), which every process the node starts inherits — forked, re-executed or
  detached into a new session alike;
* a **directory** of its own under the test's tmp dir: ``tracking/`` ($TRACKING_CORE_DIR),
  ``work/`` (the working directory), ``tmp/`` ($TMPDIR) and ``logs/`` (what each command printed);
* an **environment** of its own: the test's environment without any ``TRACKING_CORE_*``,
  ``MLFLOW_*`` or ``PYTEST_*`` variable (a node is told only what the test tells it), the
  node's ``env`` and then the command's on top.

Each command started on a node gets a namespace of its own with the node's hostname: a command
run after the node was lost (``tracking-core sync`` on the node that comes back) is the same
host to tracking-core, and ``NodeProcess.kill`` ends one command without the rest of the node.

>>> node = SimulatedNode("node1", tmp_path, env={"MLFLOW_TRACKING_URI": server.uri})
>>> proc = node.start([sys.executable, "train.py"])   # runs with hostname node1
>>> proc.wait_for("step 3")                           # reads its output as it comes
>>> node.kill()                                       # SIGKILL to every process of the node
>>> node.run(["tracking-core", "sync"]).returncode     # a later command on the same node
>>> node.close()                                      # kill what is left (a fixture does this)

:meth:`SimulatedNode.kill` is a node loss: every process in any of the node's namespaces gets
SIGKILL, including processes that left the node's process group or were re-parented (a
delivery process that detached from the process that started it). Only the node's processes are
touched: a process is the node's exactly when its ``/proc/<pid>/ns/uts`` is one the node made.

:class:`Link` is a node's route to a server (a TCP relay on 127.0.0.1) that the test can hold:
while held, what the node sends waits unread, as behind a congested or partitioned network, and
:meth:`Link.sever` drops every connection with what it held (so nothing a dead node sent arrives
later). The fixture ``simulated_nodes`` is a list the test appends its nodes to; each is killed
when the test ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

#: Variables a node never inherits from the test: it is told its settings explicitly.
DROPPED_PREFIXES = ("TRACKING_CORE_", "MLFLOW_", "PYTEST_")

_HOSTNAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def unshare_available() -> bool:
    """Whether this process may create UTS namespaces (root with ``unshare`` installed)."""
    return shutil.which("unshare") is not None and os.geteuid() == 0


def _uts_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/uts")
    except OSError:  # gone, or a zombie
        return None


#: In the environment of every command a node starts: the node's own directory. A namespace's
#: number is reused once the namespace is gone, so a process in a namespace a node recorded is
#: that node's only if it carries the node's mark too (another test's node may hold the number).
MARK = "SIMULATED_NODE_ROOT"


def _marked(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return mark in fh.read().split(b"\0")
    except OSError:  # gone
        return False


class NodeProcess:
    """One command started on a node; its stdout and stderr go to ``log_path``."""

    def __init__(self, node: SimulatedNode, popen: subprocess.Popen[bytes], log_path: Path) -> None:
        self.node = node
        self.popen = popen
        self.log_path = log_path
        self.namespace: str | None = None

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL to this command and everything it started (its namespace), not the rest of
        the node."""
        self.node.kill(timeout, only=self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def output(self) -> str:
        """Everything the command printed so far (stdout and stderr interleaved)."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait(self, timeout: float) -> int:
        """Its exit code; raises ``TimeoutError`` with the output's tail if it runs past ``timeout``."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(
                f"{self.node.name}: {self.popen.args!r} still running after {timeout:.0f} s\n{self.tail()}"
            ) from None

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        """Wait until the output matches ``pattern`` (a regular expression); raise ``TimeoutError``
        (or ``RuntimeError`` if the command exited first) with the output's tail."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.output())
            if found:
                return found
            if self.popen.poll() is not None:
                found = re.search(pattern, self.output())
                if found:
                    return found
                raise RuntimeError(
                    f"{self.node.name}: exited {self.popen.returncode} before printing {pattern!r}\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.node.name}: no {pattern!r} within {timeout:.0f} s\n{self.tail()}"
                )
            time.sleep(0.1)

    def tail(self, chars: int = 6000) -> str:
        return f"--- output of {self.node.name} ({self.log_path}) ---\n{self.output()[-chars:]}"


class SimulatedNode:
    """A node: hostname ``name``, directories under ``<root>/<name>``, its own environment."""

    def __init__(
        self, name: str, root: str | os.PathLike[str], env: Mapping[str, str] | None = None
    ) -> None:
        if not _HOSTNAME.match(name):
            raise ValueError(
                f"node name {name!r} is not a host name (lowercase letters, digits, '-')"
            )
        self.name = name
        self.root = Path(root) / name
        self.tracking_dir = self.root / "tracking"
        self.cwd = self.root / "work"
        self.tmp = self.root / "tmp"
        self.logs = self.root / "logs"
        for folder in (self.tracking_dir, self.cwd, self.tmp, self.logs):
            folder.mkdir(parents=True, exist_ok=True)
        self.extra_env = dict(env or {})
        self.namespaces: set[str] = set()
        self.processes: list[NodeProcess] = []

    def environment(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a command on this node gets (see the module docstring)."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED_PREFIXES)}
        base.update(
            {
                "TRACKING_CORE_DIR": str(self.tracking_dir),
                "TMPDIR": str(self.tmp),
                "PWD": str(self.cwd),
                MARK: str(self.root),
            }
        )
        base.update(self.extra_env)
        base.update(env or {})
        return base

    def start(
        self,
        command: Sequence[str | os.PathLike[str]],
        *,
        env: Mapping[str, str] | None = None,
        label: str | None = None,
    ) -> NodeProcess:
        """Start ``command`` on this node (its own session, output to ``logs/<label>.log``)."""
        label = label or Path(str(command[0])).name
        log_path = self.logs / f"{len(self.processes):02d}-{label}.log"
        script = 'hostname "$0" && exec "$@"'
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                ["unshare", "--uts", "sh", "-c", script, self.name, *map(str, command)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(env),
                cwd=self.cwd,
                start_new_session=True,
            )
        process = NodeProcess(self, popen, log_path)
        self.processes.append(process)
        process.namespace = self._learn_namespace(popen)
        return process

    def _learn_namespace(self, popen: subprocess.Popen[bytes], timeout: float = 10.0) -> str | None:
        """Record the namespace ``unshare`` made (the process leaves ours right after it starts)."""
        ours = _uts_namespace(os.getpid())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            namespace = _uts_namespace(popen.pid)
            if namespace is None and popen.poll() is not None:
                return None  # already over, too fast to be seen
            if namespace is not None and namespace != ours:
                self.namespaces.add(namespace)
                return namespace
            time.sleep(0.002)
        raise RuntimeError(
            f"{self.name}: {popen.args!r} did not enter a namespace of its own in {timeout:.0f} s"
        )

    def run(
        self,
        command: Sequence[str | os.PathLike[str]],
        *,
        env: Mapping[str, str] | None = None,
        label: str | None = None,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` on this node to the end; returns its exit code and output."""
        process = self.start(command, env=env, label=label)
        try:
            code = process.wait(timeout)
        finally:
            if process.returncode is None:
                process.kill()
        return subprocess.CompletedProcess(process.popen.args, code, process.output(), "")

    def pids(self, only: NodeProcess | None = None) -> list[int]:
        """Every process now in one of this node's namespaces (``only``: in that command's) that
        carries the node's mark (:data:`MARK`)."""
        namespaces = self.namespaces if only is None else {only.namespace} - {None}
        if not namespaces:
            return []
        mark = f"{MARK}={self.root}".encode()
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and _uts_namespace(int(entry.name)) in namespaces and _marked(int(entry.name), mark):
                found.append(int(entry.name))
        return found

    def kill(self, timeout: float = 10.0, only: NodeProcess | None = None) -> None:
        """Lose the node: SIGKILL to every process of it until none is left (raises if one
        survives ``timeout``). ``only``: that command's processes, not the rest of the node."""
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids(only)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            for process in self.processes if only is None else [only]:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.popen.wait(0.05 if pids else 0)
            if not pids:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.name}: processes {pids} survived SIGKILL for {timeout:.0f} s"
                )
            time.sleep(0.05)

    def close(self) -> None:
        """Kill whatever of the node is still running."""
        self.kill()


class Link:
    """A TCP relay from ``uri`` (127.0.0.1, a free port) to ``host:port`` that the test can hold.

    Open, it passes bytes both ways as they come. :meth:`hold` stops passing them: what either
    side sends waits (unread, or read and kept) until :meth:`release`. :meth:`sever` closes every
    connection now, dropping what was held; new connections are taken as before. ``tap``, if
    given, makes one callable per connection that is handed every chunk the client sends, in
    order, as it is passed on (to count requests, say).
    """

    def __init__(
        self, host: str, port: int, tap: Callable[[], Callable[[bytes], None]] | None = None
    ) -> None:
        self.target = (host, port)
        self.tap = tap
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._open = threading.Event()
        self._open.set()
        self._closed = False
        self._lock = threading.Lock()
        self._connections: list[tuple[socket.socket, socket.socket]] = []
        self._generation = 0
        self.connections_made = 0
        threading.Thread(target=self._accept, name=f"link-{self.port}", daemon=True).start()

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def sever(self) -> None:
        with self._lock:
            self._generation += 1
            connections, self._connections = self._connections, []
        for pair in connections:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self._closed = True
        self.sever()
        self._open.set()
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                generation = self._generation
                self._connections.append((client, server))
                self.connections_made += 1
            sent = self.tap() if self.tap is not None else None
            for src, dst, seen in ((client, server, sent), (server, client, None)):
                threading.Thread(
                    target=self._pump, args=(src, dst, generation, seen), daemon=True
                ).start()

    def _pump(
        self,
        src: socket.socket,
        dst: socket.socket,
        generation: int,
        seen: Callable[[bytes], None] | None,
    ) -> None:
        try:
            while True:
                self._open.wait()
                data = src.recv(65536)
                if not data:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    return
                self._open.wait()
                if self._generation != generation or self._closed:
                    return  # severed while held: what was read is dropped
                if seen is not None:
                    seen(data)
                dst.sendall(data)
        except OSError:
            return

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def simulated_nodes(tmp_path: Path) -> Iterator[list[SimulatedNode]]:
    """A list the test appends its nodes to (``SimulatedNode(name, tmp_path / "nodes")``); every
    node in it is killed when the test ends. Skips where namespaces cannot be made."""
    if not unshare_available():
        pytest.skip("simulated nodes need root and unshare (a UTS namespace per node)")
    nodes: list[SimulatedNode] = []
    try:
        yield nodes
    finally:
        for node in nodes:
            node.close()
