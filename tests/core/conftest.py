"""Fixtures for the core tests: a throw-away installed distribution carrying plugins."""

from __future__ import annotations

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


@pytest.fixture
def site(tmp_path: Path) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    return path
