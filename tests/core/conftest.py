"""Fixtures for the core tests: a throw-away installed distribution carrying plugins."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def make_dist(site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> Path:
    """Write a real installed distribution (``*.dist-info`` with ``entry_points.txt``) into
    ``site``: what ``pip install`` of a plugin package leaves behind."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "\n".join(f"{name} = {target}" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[tracking_core]\n{lines}\n")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))
    return info


def run_python(code: str, *, site: Path | None = None, env: dict[str, str] | None = None,
               cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (with ``site`` on the path), failing loudly."""
    full_env = dict(os.environ)
    full_env.pop("TRACKING_CORE_RUN", None)
    full_env.pop("TRACKING_CORE_BACKENDS", None)
    if site is not None:
        full_env["PYTHONPATH"] = os.pathsep.join(
            [str(site), full_env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )


@pytest.fixture
def site(tmp_path: Path) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    return path
