"""Entry points of one group, read straight from the installed distributions' files.

:func:`importlib.metadata.entry_points` answers the same question, but the first call in a
process imports ``importlib.metadata`` (with ``email``, ``zipfile``, ``csv``: about 10 ms), builds
an object for every installed distribution and parses every ``entry_points.txt``, and each
distribution's name then parses its whole ``METADATA`` with the ``email`` package: tens of
milliseconds in the first ``start_run`` of a training process. Here, each directory of
``sys.path`` is listed once, and only the ``entry_points.txt`` files are read (a substring test
skips a file without the group), the name and version of a distribution only when asked, from
the headers of its metadata file.

The answer is the one ``importlib.metadata`` gives: the distributions of every ``sys.path``
entry in path order, those of one name counted once (the first found, by the normalized name in
the folder's name), their entry points in file order. Where that search could differ (an entry
of ``sys.path`` that is a zip file, or a finder on ``sys.meta_path`` that finds distributions of
its own), :func:`entry_points` asks ``importlib.metadata`` instead.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
from typing import Any

_INFO_SUFFIXES = (".dist-info", ".egg-info")
#: ``module``, ``module:attr`` or ``module:attr.attr``, optionally ``[extras]`` (as in
#: :class:`importlib.metadata.EntryPoint`).
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


class Distribution:
    """An installed distribution's folder; its ``Name`` and ``Version`` read on first use."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    @functools.cached_property
    def metadata(self) -> dict[str, str]:
        """The single-line headers of its metadata file (``METADATA`` or ``PKG-INFO``)."""
        headers: dict[str, str] = {}
        for name in ("METADATA", "PKG-INFO"):
            try:
                with open(os.path.join(self.folder, name), encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        if not line.strip():
                            break  # the headers end at the first empty line
                        key, sep, value = line.partition(":")
                        if sep and not key.startswith((" ", "\t")):
                            headers.setdefault(key.strip(), value.strip())
            except OSError:
                continue
            return headers
        return headers

    @property
    def name(self) -> str | None:
        return self.metadata.get("Name")

    @property
    def version(self) -> str | None:
        return self.metadata.get("Version")


class EntryPoint:
    """One entry point: ``name = value`` of ``group`` in ``dist``'s ``entry_points.txt``."""

    def __init__(self, name: str, value: str, group: str, dist: Distribution) -> None:
        self.name, self.value, self.group, self.dist = name, value, group, dist

    def load(self) -> Any:
        """The object the entry point names (its module imported)."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r} = {self.value!r} names no module")
        module = importlib.import_module(match.group("module"))
        attrs = filter(None, (match.group("attr") or "").split("."))
        return functools.reduce(getattr, attrs, module)

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def _normalized(folder_name: str) -> str:
    """The distribution name in an info folder's name, as ``importlib.metadata`` compares them."""
    name = folder_name.rpartition(".")[0].partition("-")[0]
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _plain_search() -> bool:
    """Whether every distribution lives in a directory of ``sys.path`` (the search below finds
    them all): no zip file on the path, no other finder of distributions."""
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and hasattr(finder, "find_distributions"):
            return False
    return not any(entry and os.path.isfile(entry) for entry in sys.path)


def _group_lines(text: str, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` pairs of ``[group]`` in an ``entry_points.txt``."""
    out, current = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line.strip("[]")
            continue
        if current == group:
            name, sep, value = line.partition("=")
            if sep:
                out.append((name.strip(), value.strip()))
    return out


def entry_points(group: str) -> list[Any]:
    """The entry points of ``group`` of every installed distribution, in the order
    :func:`importlib.metadata.entry_points` gives them; each has ``name``, ``value``, ``load()``
    and ``dist`` (``dist.metadata["Name"]``, ``dist.version``)."""
    if not _plain_search():
        from importlib import metadata

        return list(metadata.entry_points(group=group))
    marker = f"[{group}]"
    seen: set[str] = set()
    out: list[Any] = []
    for entry in sys.path:
        directory = entry or "."
        try:
            children = os.listdir(directory)
        except OSError:
            continue
        infos: dict[str, list[str]] = {}
        for child in children:
            if child.lower().endswith(_INFO_SUFFIXES):
                infos.setdefault(_normalized(child.lower()), []).append(child)
        for normalized, folders in infos.items():
            if normalized in seen:
                continue
            seen.add(normalized)
            folder = os.path.join(directory, folders[0])
            try:
                with open(os.path.join(folder, "entry_points.txt"), encoding="utf-8") as fh:
                    text = fh.read()
            except OSError:
                continue
            if marker not in text:
                continue
            dist = Distribution(folder)
            out.extend(EntryPoint(name, value, group, dist) for name, value in _group_lines(text, group))
    return out
