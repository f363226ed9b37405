"""The plugin API is one module: what plugins and host adapters may import from tracking-core.

The rule (docs/hooks.md, "The plugin API"): the built-in plugins (``plugins/``), the host
adapters (``slime_integration/``, ``verl_integration/``) and the plugin template
(``examples/plugin-template/``) import

- from ``tracking_core.plugin_api`` (any name of its ``__all__``), and
- from ``tracking_core`` itself only the user-facing API: the names of ``tracking_core.__all__``
  that ``plugin_api`` does not offer (``start_run``, ``attach``, ``Run``, ``NullRun``,
  ``get_plugin_manager``, ``add_tracking_options``, ...); ``tracking_core.NAME`` after
  ``import tracking_core`` may name anything in ``tracking_core.__all__``.

Nothing else: no ``tracking_core.<module>`` other than ``plugin_api``. The walk reads every
``.py`` file with :mod:`ast` (imports inside functions count) and names each offence file:line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import tracking_core
from tracking_core import plugin_api

ROOT = Path(__file__).resolve().parents[2]
WALKED = ("plugins", "slime_integration", "verl_integration", "examples/plugin-template")
API = "tracking_core.plugin_api"
PUBLIC = frozenset(tracking_core.__all__)
OFFERED = frozenset(plugin_api.__all__)
#: What ``from tracking_core import NAME`` may name: the user-facing API, not what plugin_api offers.
USER_API = PUBLIC - OFFERED | {"plugin_api"}


def offences(path: Path, root: Path = ROOT) -> Iterator[str]:
    """``file:line: what`` for each import of tracking-core in ``path`` that breaks the rule."""
    where = path.relative_to(root)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    aliases = set()  # local names bound to the tracking_core package itself
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tracking_core":
                    aliases.add(alias.asname or alias.name)
                elif alias.name.startswith("tracking_core.") and alias.name != API:
                    yield f"{where}:{node.lineno}: import {alias.name} (use {API})"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [alias.name for alias in node.names]
            if node.module == "tracking_core":
                bad = [name for name in names if name not in USER_API]
                if bad:
                    yield (
                        f"{where}:{node.lineno}: from tracking_core import {', '.join(bad)} "
                        f"(import {'them' if len(bad) > 1 else 'it'} from {API})"
                    )
            elif node.module == API:
                bad = [name for name in names if name not in OFFERED]
                if bad:
                    yield f"{where}:{node.lineno}: {API} has no {', '.join(bad)}"
            elif node.module.startswith("tracking_core."):
                yield f"{where}:{node.lineno}: from {node.module} import {', '.join(names)} (use {API})"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr not in PUBLIC | {"plugin_api"}
        ):
            yield f"{where}:{node.lineno}: {node.value.id}.{node.attr} is not public (use {API})"


def walked_files(root: Path = ROOT) -> list[Path]:
    return sorted(path for folder in WALKED for path in (root / folder).rglob("*.py"))


def test_plugins_and_adapters_import_only_the_plugin_api() -> None:
    files = walked_files()
    assert len(files) > 40, files  # the walk found the plugins, both adapters and the template
    found = [line for path in files for line in offences(path)]
    assert not found, "imports outside the plugin API:\n" + "\n".join(found)


def test_the_walk_names_each_kind_of_offence(tmp_path: Path) -> None:
    """The rule's failing half on a file written to break it in every way it knows."""
    bad = tmp_path / "plugins" / "tracking_bad" / "__init__.py"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "import tracking_core\n"
        "import tracking_core.registry\n"
        "from tracking_core.config import artifact_path\n"
        "from tracking_core import hookimpl, start_run\n"
        "from tracking_core import options as opts\n"
        "from tracking_core.plugin_api import no_such_helper\n"
        "def f():\n"
        "    from tracking_core.viewers import runnable\n"
        "    return tracking_core.settings, tracking_core.attach\n"
    )
    found = list(offences(bad, tmp_path))
    assert [line.split(":")[1] for line in found] == ["2", "3", "4", "5", "6", "8", "9"], found
    assert "plugins/tracking_bad/__init__.py:4: from tracking_core import hookimpl (import it from" in found[2]
    assert "tracking_core.settings is not public" in found[-1]
    good = tmp_path / "plugins" / "tracking_good.py"
    good.write_text(
        "import tracking_core\n"
        "from tracking_core import attach, start_run\n"
        "from tracking_core.plugin_api import Backend, hookimpl\n"
        "run = tracking_core.start_run\n"
    )
    assert list(offences(good, tmp_path)) == []


def test_every_name_of_the_plugin_api_is_there() -> None:
    """``__all__`` is explicit, and every name in it resolves (the lazy ones included)."""
    assert len(OFFERED) == len(plugin_api.__all__)
    for name in plugin_api.__all__:
        assert getattr(plugin_api, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        getattr(plugin_api, "nothing_here")  # noqa: B009


def test_plugin_api_names_are_the_objects_the_core_uses() -> None:
    """Re-exports, not copies: a plugin's MetricRecord is the core's MetricRecord."""
    from tracking_core.config import artifact_path
    from tracking_core.records import MetricRecord
    from tracking_core.registry import BackendRegistrar

    assert plugin_api.MetricRecord is MetricRecord
    assert plugin_api.BackendRegistrar is BackendRegistrar
    assert plugin_api.artifact_path is artifact_path
    assert plugin_api.hookimpl is tracking_core.hookimpl


def test_docs_list_every_name_of_the_plugin_api() -> None:
    doc = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    section = doc.split("\n## The plugin API: `tracking_core.plugin_api`\n", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in plugin_api.__all__ if f"`{name}`" not in section]
    assert not missing, f"docs/hooks.md's plugin API section lacks {missing}"
    # the module docstring is the same map
    assert not [name for name in plugin_api.__all__ if name not in (plugin_api.__doc__ or "")]
