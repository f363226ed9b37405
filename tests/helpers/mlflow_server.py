"""A real ``mlflow server`` for tests: SQLite store in a temporary directory, 127.0.0.1, one worker.

Tests that need a tracking server start one here instead of mocking MLflow:

>>> with MlflowServer(tmp_path) as server:          # starts, waits for /health
...     client = MlflowClient(server.uri)
...     server.kill()                                # a crash: SIGKILL to the whole process group
...     server.restart()                             # same port, same store

The server runs in its own process group (``start_new_session``) because ``mlflow server``
starts uvicorn as a child: signalling only the parent can leave a worker holding the port. It
runs with one worker (four cost ~50 ms per keep-alive request) and with job execution off (it
would start a second process tree). Its output goes to ``server.log`` in the store directory and
its tail is shown when the server fails to start.

Fixtures: ``mlflow_server`` (one server per test session, never killed; reuse it freely) and
``mlflow_server_factory`` (servers owned by one test, for tests that kill or restart them). A test
module or conftest makes them available with
``from tests.helpers.mlflow_server import mlflow_server  # noqa: F401``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

#: Seconds to wait for ``/health`` after a start; a cold start takes ~5-10 s on a 2-core machine.
START_TIMEOUT = 90.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class MlflowServerError(RuntimeError):
    """The server did not come up; the message carries the end of its log."""


class MlflowServer:
    """One ``mlflow server`` process group over a SQLite store in ``root``.

    ``uri`` stays the same across :meth:`restart` (same port, same store), so clients that held
    it reconnect to the restarted server as they would to a real one.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        workers: int = 1,
        env: dict[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = port or free_port(host)
        self.workers = workers
        self.extra_env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    # -- where things are ----------------------------------------------------------------------
    @property
    def uri(self) -> str:
        """The tracking URI clients use (``http://127.0.0.1:PORT``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def db_path(self) -> Path:
        return self.root / "mlflow.db"

    @property
    def backend_store_uri(self) -> str:
        return f"sqlite:///{self.db_path}"

    @property
    def artifacts_dir(self) -> Path:
        return self.root / "artifacts"

    @property
    def log_path(self) -> Path:
        return self.root / "server.log"

    # -- lifecycle -----------------------------------------------------------------------------
    def _command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            self.backend_store_uri,
            "--artifacts-destination",
            str(self.artifacts_dir),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
        ]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # The server must not inherit a client-side tracking URI or a test's pytest marker
        # (MLflow turns on extra session validation when PYTEST_CURRENT_TEST is set).
        for name in ("MLFLOW_TRACKING_URI", "PYTEST_CURRENT_TEST"):
            env.pop(name, None)
        env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = START_TIMEOUT) -> MlflowServer:
        """Start the server and return once ``/health`` answers; raise with its log tail if not."""
        if self.alive():
            return self
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
        try:
            log.write(f"\n--- start {self.starts + 1} on port {self.port} ---\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self._command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                cwd=self.root,
                start_new_session=True,
            )
        finally:
            log.close()
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise MlflowServerError(
                    f"mlflow server exited with code {self.proc.returncode} before answering "
                    f"/health on {self.uri}:\n{self.log_tail()}"
                )
            if self.healthy():
                return self
            time.sleep(0.2)
        self.kill()
        raise MlflowServerError(
            f"mlflow server did not answer /health on {self.uri} within {timeout:.0f} s:\n"
            f"{self.log_tail()}"
        )

    def healthy(self, timeout: float = 1.0) -> bool:
        """Whether ``/health`` answers OK right now."""
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=timeout) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _signal_group(self, sig: int) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def _wait_group_gone(self, timeout: float) -> bool:
        """Wait until no process of the group is left (the parent reaped, children gone)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout)
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                return False
            time.sleep(0.05)
        return False

    def stop(self, timeout: float = 15.0) -> None:
        """Stop gracefully: SIGTERM to the whole group, then SIGKILL whatever is left."""
        if self.proc is None:
            return
        self._signal_group(signal.SIGTERM)
        if not self._wait_group_gone(timeout):
            self._signal_group(signal.SIGKILL)
            self._wait_group_gone(5.0)
        self.proc = None

    def kill(self) -> None:
        """Crash the server: SIGKILL to the whole group, as an OOM killer or a node loss would."""
        if self.proc is None:
            return
        self._signal_group(signal.SIGKILL)
        self._wait_group_gone(10.0)
        self.proc = None

    def restart(self, timeout: float = START_TIMEOUT, graceful: bool = True) -> MlflowServer:
        """Stop (or kill) and start again on the same port and the same store."""
        if graceful:
            self.stop()
        else:
            self.kill()
        return self.start(timeout)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> MlflowServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(root: str | os.PathLike[str], **kwargs: object) -> MlflowServer:
    """Start a server on a free port; a port taken between choosing and binding is retried."""
    last: MlflowServerError | None = None
    for _ in range(3):
        server = MlflowServer(root, **kwargs)  # type: ignore[arg-type]
        try:
            return server.start()
        except MlflowServerError as exc:
            last = exc
            server.kill()
            if "address already in use" not in str(exc).lower():
                raise
    assert last is not None
    raise last


#: The session's shared server, one per test process (each pytest-xdist worker has its own).
_SHARED: MlflowServer | None = None


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> MlflowServer:
    """A running ``mlflow server`` shared by the whole session. Do not kill or restart it: use
    ``mlflow_server_factory`` for that.

    A test module that imports this fixture gets a definition of its own, which pytest would
    run again: every definition hands out the same server, started once and stopped when the
    session ends."""
    global _SHARED
    if _SHARED is None or not _SHARED.alive():
        _SHARED = start_server(tmp_path_factory.mktemp("mlflow-server"))
    return _SHARED


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the shared server at the end of the session (of this worker's, under xdist)."""
    global _SHARED
    if _SHARED is not None:
        _SHARED.stop()
        _SHARED = None


@pytest.fixture
def mlflow_server_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., MlflowServer]]:
    """Start servers owned by one test (``factory()`` → a started :class:`MlflowServer`); every
    one of them is stopped when the test ends, whatever state the test left it in."""
    servers: list[MlflowServer] = []

    def factory(**kwargs: object) -> MlflowServer:
        server = start_server(tmp_path_factory.mktemp("mlflow-server"), **kwargs)
        servers.append(server)
        return server

    try:
        yield factory
    finally:
        for server in servers:
            server.stop()
