"""Run Python code in a fresh interpreter, as another process of a job would.

The child gets this process's environment minus the variables named in ``drop`` (names or
``fnmatch`` patterns; by default the run handle and backend selection a test may have exported),
with ``site`` put first on ``PYTHONPATH``, and then ``env`` on top. Its output is captured as text.

* :func:`run_python` runs the code to the end and returns the ``CompletedProcess``; with ``check``
  (the default) a non-zero exit fails the test with the process's stdout and stderr.
* :func:`start_python` / :func:`finish_python` do the same in two halves, for tests that run
  several processes at once or act on a process while it runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

DEFAULT_DROP = ("TRACKING_CORE_RUN", "TRACKING_CORE_BACKENDS")
#: The job programs the tests run: files of their own (linted and type-checked with the core).
JOBS = Path(__file__).resolve().parents[1] / "jobs"
OUTPUT_TAIL = 6000  # characters of each stream shown when a checked process fails


def python_env(
    env: Mapping[str, str] | None = None,
    *,
    drop: Iterable[str] = DEFAULT_DROP,
    site: str | os.PathLike[str] | None = None,
) -> dict[str, str]:
    """This process's environment without ``drop``, ``site`` first on ``PYTHONPATH``, ``env`` on
    top (an ``env`` ``PYTHONPATH`` replaces the whole path)."""
    patterns = tuple(drop)
    full = {k: v for k, v in os.environ.items() if not any(fnmatchcase(k, p) for p in patterns)}
    if site is not None:
        full["PYTHONPATH"] = os.pathsep.join([str(site), full.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
    full.update(env or {})
    return full


def start_python(
    code: str | Path,
    *,
    args: Sequence[str | os.PathLike[str]] = (),
    env: Mapping[str, str] | None = None,
    drop: Iterable[str] = DEFAULT_DROP,
    site: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.Popen[str]:
    """Start ``python code *args`` (a job file) or ``python -c code *args`` (text, dedented) with
    stdout and stderr piped."""
    program = [str(code)] if isinstance(code, Path) else ["-c", textwrap.dedent(code)]
    return subprocess.Popen(
        [sys.executable, *program, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=python_env(env, drop=drop, site=site),
        cwd=cwd,
    )


def finish_python(
    proc: subprocess.Popen[str], *, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Wait for ``proc`` (killed if it outlives ``timeout``) and collect its output; with
    ``check``, fail unless it exited 0, showing what it printed."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if check:
        assert done.returncode == 0, (
            f"python exited {done.returncode}\n"
            f"--- stdout ---\n{stdout[-OUTPUT_TAIL:]}\n--- stderr ---\n{stderr[-OUTPUT_TAIL:]}"
        )
    return done


def run_python(
    code: str | Path,
    *,
    args: Sequence[str | os.PathLike[str]] = (),
    env: Mapping[str, str] | None = None,
    drop: Iterable[str] = DEFAULT_DROP,
    site: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 120,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``python code *args`` (or ``-c code``) to the end (see the module docstring for the environment)."""
    proc = start_python(code, args=args, env=env, drop=drop, site=site, cwd=cwd)
    return finish_python(proc, timeout=timeout, check=check)


def hiding(site: Path, *modules: str) -> Path:
    """``site`` (made if need be) with a ``sitecustomize`` that makes ``modules`` (top-level
    names) not importable in a process that has ``site`` on its ``PYTHONPATH``."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(JOBS / "hidden_modules.py", site / "sitecustomize.py")
    (site / "hidden_modules.txt").write_text("\n".join(modules) + "\n", encoding="utf-8")
    return site
