"""Code size of the packages: code tokens (names, operators, literals) and code lines.

Comments, docstrings and blank lines are not counted, so formatting cannot move the figures.

    python benchmarks/code_size.py [--rev GIT_REV] [PACKAGE_DIR ...]
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COUNTED = {tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING}


def _docstring_lines(source: str) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                lines.update(range(value.lineno, (value.end_lineno or value.lineno) + 1))
    return lines


def measure(source: str) -> tuple[int, int]:
    """(code tokens, code lines) of one module's source."""
    skip = _docstring_lines(source)
    tokens, lines = 0, set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in COUNTED and tok.start[0] not in skip:
            tokens += 1
            lines.add(tok.start[0])
    return tokens, len(lines)


def _files(rev: str | None, folder: str) -> dict[str, str]:
    if rev is None:
        return {str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / folder).rglob("*.py"))}
    names = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", rev, folder],
                           capture_output=True, text=True, check=True).stdout.split()
    return {n: subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{n}"], capture_output=True,
                              text=True, check=True).stdout for n in names if n.endswith(".py")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="a git revision to measure instead of the working tree")
    parser.add_argument("folders", nargs="*", default=["tracking_core", "tracking_core/delivery", "plugins"])
    args = parser.parse_args()
    for folder in args.folders:
        sizes = [measure(s) for s in _files(args.rev, folder).values()]
        print(f"{folder:28} {sum(t for t, _ in sizes):>8} tokens {sum(n for _, n in sizes):>7} lines")


if __name__ == "__main__":
    main()
