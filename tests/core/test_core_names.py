"""The core names no tracker and no host, and imports no plugin and no adapter.

Every module under ``tracking_core/`` is read with ``ast``: its string constants (docstrings
left out; comments are not in the tree) and its identifiers (names, attributes, functions,
classes, arguments, keywords, imports) must not contain a tracker's name (wandb, mlflow,
tensorboard, tensorboardX, swanlab, trackio, jsonl, console) nor a host's (slime, verl), and no
module may import a plugin package (``tracking_*`` other than ``tracking_core``),
``slime_integration`` or ``verl_integration``, by an import statement or ``import_module``.
What a tracker or a host needs of the core is asked through hooks and entry points instead.

The exceptions, each with its reason, are :data:`EXEMPT_FILES` and :data:`EXEMPT_TEXTS`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "tracking_core"

NAMES = re.compile(
    r"(?<![a-z0-9])(wandb|mlflow|tensorboardx|tensorboard|swanlab|trackio|jsonl|console|slime|verl)",
    re.IGNORECASE,
)
ADAPTERS = re.compile(r"^(tracking_(?!core(\.|$))\w+|slime_integration|verl_integration)(\.|$)")

#: Modules whose tracker names are their subject; plugin imports are still refused there.
EXEMPT_FILES = {
    # the secret rules: tracker key names (WANDB_API_KEY) are secret-shaped words
    "tracking_core/config/secrets.py": "the secret rules name the trackers' credentials",
    # Accelerate's and Lightning's own integrations: those libraries name their trackers
    "tracking_core/integrations/accelerate.py": "Accelerate's integration",
    "tracking_core/integrations/_accelerate_tracker.py": "Accelerate's integration",
    "tracking_core/integrations/lightning.py": "Lightning's integration",
    "tracking_core/integrations/_lightning_logger.py": "Lightning's integration",
}

#: (module, exact string or identifier) that may stay, and why.
EXEMPT_TEXTS = {
    # the journal's own segment files are JSON lines: a file suffix, not the jsonl tracker
    ("tracking_core/delivery/journal.py", ".jsonl"),
    # the one table of every TRACKING_CORE_* variable (tests/core/test_settings.py holds it
    # to the code and the docs) lists the console plugin's own variable too
    ("tracking_core/settings.py", "CONSOLE_INTERVAL"),
    ("tracking_core/settings.py", "TRACKING_CORE_CONSOLE_INTERVAL"),
    ("tracking_core/settings.py", "seconds between the console backend's views (like --console-interval; default 5)"),
}

#: The ``slime`` config key style (actor unprefixed, critic/ prefixed, no launch params) is one
#: of the core's own two key styles, not a host's code: its name is the value users pass (--tracking-key-style slime,
#: $TRACKING_CORE_KEY_STYLE, saved in run handles), tests/config hold KEY_STYLES to
#: ("default", "slime"), and the config pipeline that applies it runs in every writer without
#: the plugin manager (tests/config/test_config_imports.py).
KEY_STYLE_NAMES = {
    ("tracking_core/config/keys.py", "slime"),
    ("tracking_core/options.py", "slime"),
    (
        "tracking_core/options.py",
        "Config key naming: 'default' (launch config unprefixed, <role>/key per role) or "
        "'slime' (slime's own keys: actor unprefixed, critic/ prefixed).",
    ),
    ("tracking_core/settings.py", "config key style: default or slime (like --tracking-key-style)"),
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def texts(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, text) of every string constant outside docstrings and every identifier."""
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value
        elif isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.lineno, node.name
        elif isinstance(node, ast.arg):
            yield node.lineno, node.arg
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.lineno, node.arg
        elif isinstance(node, ast.alias):
            yield node.lineno, node.name
            if node.asname:
                yield node.lineno, node.asname
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module


def imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module) of every absolute import, and of ``import_module("...")`` calls."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def _modules() -> list[tuple[str, ast.AST]]:
    return [(str(p.relative_to(ROOT)), ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(CORE.rglob("*.py"))]


def names_in_core(allowed: set[tuple[str, str]]) -> list[str]:
    found = []
    for path, tree in _modules():
        if path in EXEMPT_FILES:
            continue
        for line, text in texts(tree):
            if NAMES.search(text) and (path, text) not in allowed:
                found.append(f"{path}:{line}: {text[:100]!r}")
    return found


def test_the_core_names_no_tracker_and_no_host() -> None:
    found = names_in_core(EXEMPT_TEXTS | KEY_STYLE_NAMES)
    assert found == [], "\n".join(found)


def test_the_core_imports_no_plugin_and_no_adapter() -> None:
    found = [
        f"{path}:{line}: {module}"
        for path, tree in _modules()
        for line, module in imported(tree)
        if ADAPTERS.match(module)
    ]
    assert found == [], "\n".join(found)


def test_the_allowances_are_still_needed() -> None:
    """An allowance whose text is gone must leave the list (so the list only shrinks)."""
    present = {(path, text) for path, tree in _modules() for _, text in texts(tree)}
    stale = sorted((KEY_STYLE_NAMES | EXEMPT_TEXTS) - present)
    assert stale == [], stale


def test_the_check_sees_names_and_imports() -> None:
    """The reader finds what it is meant to (a check that cannot fail proves nothing)."""
    tree = ast.parse(
        '"""A docstring naming wandb is fine."""\n'
        "import tracking_mlflow.backend\n"
        "from slime_integration.demo import driver  # a comment naming verl is fine\n"
        "importlib.import_module('verl_integration.install')\n"
        "def show_jsonl(console_width):\n"
        "    return open_run(backend='TensorBoardX')\n"
    )
    hits = sorted({m.group(1).lower() for _, t in texts(tree) for m in NAMES.finditer(t)})
    assert hits == ["console", "jsonl", "mlflow", "slime", "tensorboardx", "verl"]
    assert [m for _, m in imported(tree) if ADAPTERS.match(m)] == [
        "tracking_mlflow.backend",
        "slime_integration.demo",
        "verl_integration.install",
    ]
    assert not ADAPTERS.match("tracking_core.plugin_api")
