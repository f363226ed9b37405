"""The plugin template, built and installed by pip (no network, no dependencies) into a folder
that goes on ``PYTHONPATH``: a distribution with its metadata and entry point, as a user's
``pip install`` of their copy makes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[2] / "examples" / "plugin-template"


def install_template(work: Path, prepare: Callable[[Path], None] | None = None) -> Path:
    """Install a copy of the template under ``work`` (``prepare`` edits the copy first); returns
    the folder it was installed into."""
    source = work / "src"
    shutil.copytree(TEMPLATE, source)  # building writes into the source tree: not the checkout's
    if prepare is not None:
        prepare(source)
    site = work / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(source)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return site
