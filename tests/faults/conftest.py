"""Fault injection: a backend whose failures are switched by environment variables, jobs run as
scripts in a fresh interpreter, tmpfs mounts, and readers for what the backend received.

**The fault backend** (tests/jobs/fault_backend.py) is a real installed distribution
(``make_dist``) with the entry point ``faulty``, so every interpreter of a job -- the training process, its delivery process and
``tracking-core sync`` -- loads it through the ``tracking_core`` entry-point group. It offers two
backends: ``faulty``, whose behaviour the switches below change, and ``steady``, which records
the same lines and never fails (the reference for "skipped for that tracker only"). Every switch
is read at call time, so a test can flip it while the job runs:

``FAULT_OUT``         file each call appends JSON lines to (one per record for ``log_metrics``),
                      each with ``ev``, ``b`` (the backend) and ``pid``
``FAULT_DOWN_FILE``   while this path exists every call raises ``ConnectionError`` (an outage
                      switched on and off by creating and removing the file)
``FAULT_FAIL_CLOSE``  ``1``: ``close_run`` always raises
``FAULT_FAIL_CONFIG`` a namespace: ``log_config`` of that namespace always raises
``FAULT_REJECT_KEY``  a metric name: ``log_metrics`` raises ``ValueError`` whenever the batch holds
                      it (as W&B does for an empty key); set to ``""`` it rejects the empty key;
                      a table, histogram, text or artifact of that key is refused likewise
``FAULT_SLOW``        seconds each ``log_metrics`` call sleeps
``FAULT_SLOW_CONNECT`` seconds each ``open_run`` / ``attach_run`` call sleeps
``FAULT_MAX_BATCH``   the backends' ``max_batch`` (records per ``log_metrics`` call)
``FAULT_COUNT_ONLY``  ``1``: ``log_metrics`` writes one ``batch`` line with the record count
                      instead of one line per record (for runs of many values)

Lines: ``open`` / ``attach`` (role, primary, training pid), ``config`` (namespace, role, params),
``metric`` (name, key, step, value, ts), ``batch`` (n), ``table`` (columns, rows),
``histogram`` (counts, count), ``text`` (text), ``artifact`` (sha256, size, snapshot, kind),
``close`` (status, primary) and, for a refused call, ``refused`` (hook, why).

**Jobs** (:func:`start_job` / :func:`run_job`) are files of tests/jobs (so ``multiprocessing``'s
spawn can load them again) that load ``fault_prelude`` (tests/jobs/fault_prelude.py) first,
which keeps every WARNING-or-worse log record and Python warning the process emitted and prints
them at exit as a ``WARNINGS`` line; its ``report(...)`` prints a ``RESULT`` line. Neither needs
anything of tracking-core beyond its public API, except ``delivery_pid`` (``run._delivery.pid``,
falling back to the pid that last opened or attached the fault backend). A job given as text
runs behind :data:`PRELUDE`, the prelude's own text.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.core.conftest import make_dist
from tests.helpers.subprocess_python import JOBS, python_env

#: Put before every job's code: keep WARNING+ log records and Python warnings, print them at exit.
#: The prelude of every job (tests/jobs/fault_prelude.py): a job file imports it first; a job
#: given as text runs behind its text.
PRELUDE = (JOBS / "fault_prelude.py").read_text(encoding="utf-8")

#: Nothing of the test process's own settings reaches a job or a sync.
DROP = ("TRACKING_CORE_*", "MLFLOW_*", "WANDB_*", "FAULT_*", "PYTEST_*")


# -- the fault backend ---------------------------------------------------------------------------
@pytest.fixture(scope="session")
def fault_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A "site" directory holding the fault backend as an installed distribution."""
    site = tmp_path_factory.mktemp("fault-site")
    backend = (JOBS / "fault_backend.py").read_text(encoding="utf-8")
    make_dist(site, "faulty-tracking", {"faulty": "faulty_tracking"}, {"faulty_tracking": backend})
    return site


@dataclass
class Faults:
    """One test's fault switches and output file; :meth:`env` is a job's environment."""

    site: Path
    root: Path
    out: Path
    down: Path
    switches: dict[str, str] = field(default_factory=dict)

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment without DROP, the fault site on PYTHONPATH, the fault
        switches (``FAULT_OUT``, ``FAULT_DOWN_FILE`` always set; the file decides), then
        ``extra``."""
        env = {
            "FAULT_OUT": str(self.out),
            "FAULT_DOWN_FILE": str(self.down),
            "TRACKING_CORE_EXIT_TIMEOUT": "5",
            "PYTHONUNBUFFERED": "1",
            **self.switches,
            **extra,
        }
        return python_env(env, drop=DROP, site=self.site)

    def go_down(self) -> None:
        self.down.write_text("down\n")

    def come_back(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.down.unlink()

    # -- what the backends received ------------------------------------------------------------
    def calls(self) -> list[dict[str, Any]]:
        return read_calls(self.out)

    def metrics(self, backend: str = "faulty", raw: bool = False) -> Counter[tuple[str, Any]]:
        return metric_counts(self.calls(), backend, raw=raw)

    def events(self, ev: str, backend: str = "faulty") -> list[dict[str, Any]]:
        return [c for c in self.calls() if c.get("ev") == ev and c.get("b") == backend]


@pytest.fixture
def faults(fault_site: Path, tmp_path: Path) -> Faults:
    return Faults(fault_site, tmp_path, tmp_path / "fault-out.jsonl", tmp_path / "fault-down")


def read_calls(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def metric_counts(
    calls: Iterable[Mapping[str, Any]], backend: str = "faulty", *, raw: bool = False
) -> Counter[tuple[str, Any]]:
    """How many times each ``(name, step)`` reached ``backend``.

    By default a record delivered again *identically* (same name, step, value and timestamp: a
    retry or a replay after a crash between delivery and acknowledgement) counts once, as a
    tracker that drops identical points does (MLflow's store): "exactly once" means one distinct
    record per value. ``raw`` counts every call.
    """
    seen: set[tuple[Any, ...]] = set()
    out: Counter[tuple[str, Any]] = Counter()
    for c in calls:
        if c.get("ev") != "metric" or c.get("b") != backend:
            continue
        ident = (c["name"], c["step"], repr(c["value"]), c.get("ts"))
        if not raw:
            if ident in seen:
                continue
            seen.add(ident)
        out[(c["name"], c["step"])] += 1
    return out


def once(names: Iterable[str], steps: Iterable[int]) -> Counter[tuple[str, Any]]:
    """The Counter of every (name, step) exactly once."""
    steps = list(steps)
    return Counter({(n, s): 1 for n in names for s in steps})


def only(counts: Counter[tuple[str, Any]], names: Iterable[str]) -> Counter[tuple[str, Any]]:
    """The part of ``counts`` whose names are in ``names``."""
    keep = set(names)
    return Counter({k: v for k, v in counts.items() if k[0] in keep})


def missing_and_extra(got: Counter, want: Counter) -> str:
    """A short account of how two Counters differ (for assertion messages)."""
    missing = want - got
    extra = got - want
    return (
        f"{sum(missing.values())} missing (e.g. {sorted(missing)[:5]}), "
        f"{sum(extra.values())} extra (e.g. {sorted(extra)[:5]})"
    )


# -- jobs ----------------------------------------------------------------------------------------
@dataclass
class Job:
    """A job script running (or run) in a fresh interpreter; stderr goes to a file, so a test
    may read stdout line by line without the pipes filling up."""

    proc: subprocess.Popen[str]
    script: Path
    err_path: Path
    stdout: str = ""
    returncode: int | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace") if self.err_path.exists() else ""

    def readline_until(self, prefix: str, timeout: float = 60.0) -> str:
        """Read stdout up to the first line starting with ``prefix`` (returned without it)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(
                    f"job ended (rc {self.proc.poll()}) before printing {prefix!r}:\n"
                    f"--- stdout ---\n{''.join(self.lines)[-3000:]}\n--- stderr ---\n{self.stderr[-5000:]}"
                )
            self.lines.append(line)
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        raise AssertionError(f"no {prefix!r} line within {timeout} s")

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def wait(self, timeout: float = 120.0, check: bool = True) -> Job:
        try:
            rest, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.communicate()
            raise AssertionError(
                f"job still running after {timeout} s:\n--- stderr ---\n{self.stderr[-5000:]}"
            ) from None
        self.stdout = "".join(self.lines) + (rest or "")
        self.returncode = self.proc.returncode
        if check:
            assert self.returncode == 0, self.explain(f"job exited {self.returncode}")
        return self

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def explain(self, what: str) -> str:
        return (
            f"{what}\n--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-6000:]}"
        )

    # -- what the job printed ------------------------------------------------------------------
    def results(self) -> list[dict[str, Any]]:
        return [
            json.loads(line[len("RESULT ") :])
            for line in self.stdout.splitlines()
            if line.startswith("RESULT ")
        ]

    @property
    def result(self) -> dict[str, Any]:
        """Every RESULT line the job's own process printed, merged."""
        merged: dict[str, Any] = {}
        for item in self.results():
            if item.get("pid") == self.proc.pid:
                merged.update(item)
        return merged

    @property
    def warnings(self) -> list[str]:
        """The WARNING-or-worse log messages and Python warnings of the job's own process
        (empty if it died before printing them)."""
        for line in self.stdout.splitlines():
            if line.startswith("WARNINGS "):
                data = json.loads(line[len("WARNINGS ") :])
                if data["pid"] == self.proc.pid:
                    return list(data["warnings"])
        return []

    def warnings_mentioning(self, *needles: str, exclude_summary: bool = True) -> list[str]:
        """The job's warnings holding every needle, the finish summary's own line left out."""
        summaries = [
            value["describe"]
            for r in self.results()
            for value in r.values()
            if isinstance(value, dict) and isinstance(value.get("describe"), str)
        ]
        out = []
        for message in self.warnings:
            if exclude_summary and any(s and s in message for s in summaries):
                continue
            if all(n in message for n in needles):
                out.append(message)
        return out


def start_job(
    code: str | Path,
    env: Mapping[str, str],
    *,
    args: Iterable[str | os.PathLike[str]] = (),
    cwd: str | os.PathLike[str] | None = None,
    name: str = "job",
    workdir: Path,
) -> Job:
    """Start a job file of tests/jobs (which imports :mod:`fault_prelude` first), or text written
    behind PRELUDE to ``workdir/<name>.py``, in a process group of its own; its stderr goes to
    ``workdir/<name>.stderr``."""
    err_path = workdir / f"{name}.stderr"
    n = 1
    while err_path.exists():
        n += 1
        err_path = workdir / f"{name}{n}.stderr"
    script = program = err_path.with_suffix(".py")
    if isinstance(code, Path):
        program = code
    else:
        script.write_text(PRELUDE + "\n" + textwrap.dedent(code))
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(program), *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=dict(env),
            cwd=cwd or workdir,
            start_new_session=True,
        )
    return Job(proc, program, err_path)


def run_job(
    code: str | Path,
    env: Mapping[str, str],
    *,
    workdir: Path,
    timeout: float = 120.0,
    check: bool = True,
    **kwargs: Any,
) -> Job:
    return start_job(code, env, workdir=workdir, **kwargs).wait(timeout, check=check)


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Callable[..., Job]]:
    """``jobs(code, env, ...)`` starts a job in this test's directory; every job still running
    when the test ends is killed with its whole process group."""
    started: list[Job] = []

    def start(code: str | Path, env: Mapping[str, str], **kwargs: Any) -> Job:
        job = start_job(code, env, workdir=tmp_path, **kwargs)
        started.append(job)
        return job

    try:
        yield start
    finally:
        for job in started:
            if job.proc.poll() is None:
                job.kill()
                with contextlib.suppress(Exception):
                    job.proc.communicate(timeout=10)


# -- tracking-core sync ----------------------------------------------------------------------
def sync(
    path: str | os.PathLike[str],
    env: Mapping[str, str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 180.0,
) -> subprocess.CompletedProcess[str]:
    """``python -m tracking_core.cli sync PATH`` with exactly ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "sync", "--quiet", str(path)],
        capture_output=True,
        text=True,
        env=dict(env),
        cwd=cwd,
        timeout=timeout,
    )


def explain_sync(proc: subprocess.CompletedProcess[str]) -> str:
    return f"sync exited {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-5000:]}"


# -- the journal as the rewritten core lays it out ----------------------------------------------
def journal_files(tracking_dir: Path) -> list[Path]:
    """Every file left under ``<tracking_dir>/journal`` (segments, meta, acks, locks)."""
    root = tracking_dir / "journal"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


def journal_entries(tracking_dir: Path) -> list[Path]:
    """Everything under ``<tracking_dir>/journal``: files and folders."""
    root = tracking_dir / "journal"
    return sorted(root.rglob("*")) if root.is_dir() else []


def live_segment(tracking_dir: Path, timeout: float = 30.0) -> Path:
    """The newest journal segment (``seg-NNNNNN.jsonl``; any ``*.jsonl`` in an older layout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        segments = sorted(
            (tracking_dir / "journal").rglob("*.jsonl"), key=lambda p: (p.parent, p.name)
        )
        if segments:
            return segments[-1]
        time.sleep(0.05)
    raise AssertionError(f"no journal segment under {tracking_dir / 'journal'}")


def tree_size(root: Path) -> int:
    total = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


# -- mounts --------------------------------------------------------------------------------------
@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``tmpfs(size, name=..., read_only=False)`` mounts a tmpfs of ``size`` (``"1m"``) at
    ``tmp_path/name`` and unmounts it when the test ends. Skips the test when mounting is
    impossible (not root, no mount namespace privileges)."""
    mounted: list[Path] = []

    def mount(size: str, name: str = "tmpfs", read_only: bool = False) -> Path:
        path = tmp_path / name
        path.mkdir()
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            pytest.skip(
                f"cannot mount a tmpfs at {path} ({proc.stderr.strip() or proc.returncode}): "
                "the full-disk and read-only directory faults need root and mount(8)"
            )
        mounted.append(path)
        if read_only:
            proc = subprocess.run(
                ["mount", "-o", "remount,ro", str(path)], capture_output=True, text=True
            )
            if proc.returncode != 0:
                pytest.skip(f"cannot remount {path} read-only: {proc.stderr.strip()}")
        return path

    try:
        yield mount
    finally:
        for path in reversed(mounted):
            if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
                time.sleep(0.5)  # a process of the job may still hold a file there
                if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
                    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(directory: Path, leave: int) -> Path:
    """Write a ballast file in ``directory`` so that about ``leave`` bytes stay free."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    ballast = directory / "ballast"
    with open(ballast, "wb") as fh:
        fh.write(b"\0" * max(0, free - leave))
    return ballast
