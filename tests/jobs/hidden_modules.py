"""As if some libraries were not installed: the import system cannot find the top-level modules
named, one a line, in ``hidden_modules.txt`` beside this file. Tests put both into a site folder
on a job's ``PYTHONPATH``, this file as ``sitecustomize.py``
(:func:`tests.helpers.subprocess_python.hiding`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

HIDDEN = set(Path(__file__).with_name("hidden_modules.txt").read_text(encoding="utf-8").split())


class Hide:
    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Hide())
