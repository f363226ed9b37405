"""No import circle inside tracking_core: every import statement counts.

The graph is read from the source with :mod:`ast`, not from ``sys.modules``: an import inside a
function, or under ``if TYPE_CHECKING:``, is an edge like one at the top of a module (a circle
hidden in a function is still a circle a reader has to hold in mind). ``from pkg import name``
where ``name`` is a submodule of ``pkg`` imports that submodule; otherwise it imports ``pkg``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import tracking_core

PACKAGE = Path(tracking_core.__file__).resolve().parent
NAME = "tracking_core"


def modules(root: Path = PACKAGE, name: str = NAME) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imported(node: ast.AST, module: str, is_package: bool, known: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")[: len(module.split(".")) - node.level + is_package]
            target = ".".join([*base, *([node.module] if node.module else [])])
        else:
            target = node.module or ""
        for alias in node.names:
            sub = f"{target}.{alias.name}"
            yield sub if sub in known else target


def graph(root: Path = PACKAGE, name: str = NAME) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports, from every import statement in it."""
    known = modules(root, name)
    edges: dict[str, set[str]] = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        found = {t for node in ast.walk(tree) for t in _imported(node, module, is_package, known)}
        edges[module] = {t for t in found if t in known and t != module}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of more than one module (Tarjan), its members sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def _cycle(group: list[str], edges: dict[str, set[str]]) -> list[str]:
    """One circle through the group's first module, as a path back to it (the shortest)."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(edges[node] & members):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    return group


def test_no_import_circle_inside_tracking_core() -> None:
    edges = graph()
    assert len(edges) > 50 and edges["tracking_core.plugins"], "the walk found the package"
    found = circles(edges)
    said = [f"{len(g)} modules: {', '.join(g)}\n    e.g. {' -> '.join(_cycle(g, edges))}" for g in found]
    assert not found, "import circles:\n  " + "\n  ".join(said)


def test_the_walk_sees_every_kind_of_import(tmp_path: Path) -> None:
    """A circle closed in a function, under TYPE_CHECKING, or by ``from . import module``."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .sub.c import x\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import y\n")
    (pkg / "d.py").write_text("import pkg.a\nfrom pkg import sub\n")
    edges = graph(pkg, "pkg")
    assert edges["pkg.a"] == {"pkg.b"} and edges["pkg.b"] == {"pkg.sub.c"} and edges["pkg.sub.c"] == {"pkg.a"}
    assert edges["pkg.d"] == {"pkg.a", "pkg.sub"}
    assert circles(edges) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    assert _cycle(["pkg.a", "pkg.b", "pkg.sub.c"], edges) == ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]
