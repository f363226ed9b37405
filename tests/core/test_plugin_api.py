"""The plugin API and the host API: what plugins and host adapters may import from tracking-core.

The rule (docs/hooks.md, "The plugin API"): the built-in plugins (``plugins/``) and the plugin
template (``examples/plugin-template/``) import ``tracking_core.plugin_api`` (any name of its
``__all__``) and the optional helper modules (:data:`HELPERS`); the host adapters
(``slime_integration/``, ``verl_integration/``) import ``tracking_core.plugin_api`` and
``tracking_core.host_api``. Both may import from ``tracking_core`` itself the user-facing API:
the names of ``tracking_core.__all__`` that the plugin API does not offer (``start_run``,
``attach``, ``Run``, ``NullRun``, ``get_plugin_manager``, ...); ``tracking_core.NAME`` after
``import tracking_core`` may name anything in ``tracking_core.__all__``.

Nothing else. The walk reads every ``.py`` file with :mod:`ast` (imports inside functions count)
and names each offence file:line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import tracking_core
from tracking_core import host_api, plugin_api

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ("plugins", "examples/plugin-template")
ADAPTERS = ("slime_integration", "verl_integration")
API = "tracking_core.plugin_api"
#: The optional helpers a tracker plugin may import from their own modules: not the contract.
HELPERS = frozenset(
    f"tracking_core.{m}" for m in ("config", "config.diff", "rows", "shared_run", "names", "files", "options")
)
#: What each audience may import, module -> the names it offers (None: any).
ALLOWED = {
    "plugins": {API: frozenset(plugin_api.__all__)} | dict.fromkeys(HELPERS),
    "adapters": {API: frozenset(plugin_api.__all__), "tracking_core.host_api": frozenset(host_api.__all__)},
}
PUBLIC = frozenset(tracking_core.__all__)
#: What ``from tracking_core import NAME`` may name: the user-facing API, not what plugin_api offers.
USER_API = PUBLIC - frozenset(plugin_api.__all__) | {"plugin_api", "host_api"}


def offences(path: Path, root: Path = ROOT, audience: str = "plugins") -> Iterator[str]:
    """``file:line: what`` for each import of tracking-core in ``path`` that breaks the rule."""
    allowed = ALLOWED[audience]
    use = " or ".join(m for m in allowed if m not in HELPERS)
    where = path.relative_to(root)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    aliases = set()  # local names bound to the tracking_core package itself
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tracking_core":
                    aliases.add(alias.asname or alias.name)
                elif alias.name.startswith("tracking_core.") and alias.name not in allowed:
                    yield f"{where}:{node.lineno}: import {alias.name} (use {use})"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [alias.name for alias in node.names]
            if node.module == "tracking_core":
                bad = [name for name in names if name not in USER_API]
                if bad:
                    yield (
                        f"{where}:{node.lineno}: from tracking_core import {', '.join(bad)} "
                        f"(import {'them' if len(bad) > 1 else 'it'} from {use})"
                    )
            elif node.module in allowed:
                offered = allowed[node.module]
                bad = [name for name in names if offered is not None and name not in offered]
                if bad:
                    yield f"{where}:{node.lineno}: {node.module} has no {', '.join(bad)}"
            elif node.module.startswith("tracking_core."):
                yield f"{where}:{node.lineno}: from {node.module} import {', '.join(names)} (use {use})"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr not in PUBLIC | {"plugin_api", "host_api"}
        ):
            yield f"{where}:{node.lineno}: {node.value.id}.{node.attr} is not public (use {use})"


def walked_files(folders: tuple[str, ...], root: Path = ROOT) -> list[Path]:
    return sorted(path for folder in folders for path in (root / folder).rglob("*.py"))


def test_plugins_import_only_the_plugin_api_and_helpers() -> None:
    files = walked_files(PLUGINS)
    assert len(files) > 30, files  # the walk found the plugins and the template
    found = [line for path in files for line in offences(path)]
    assert not found, "imports outside the plugin API:\n" + "\n".join(found)


def test_adapters_import_only_the_plugin_and_host_apis() -> None:
    files = walked_files(ADAPTERS)
    assert len(files) > 10, files  # the walk found both adapters
    found = [line for path in files for line in offences(path, audience="adapters")]
    assert not found, "imports outside the plugin and host APIs:\n" + "\n".join(found)


def test_the_walk_names_each_kind_of_offence(tmp_path: Path) -> None:
    """The rule's failing half on a file written to break it in every way it knows."""
    bad = tmp_path / "plugins" / "tracking_bad" / "__init__.py"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "import tracking_core\n"
        "import tracking_core.registry\n"
        "from tracking_core.plugins import get_plugin_manager\n"
        "from tracking_core import hookimpl, start_run\n"
        "from tracking_core import options as opts\n"
        "from tracking_core.plugin_api import no_such_helper\n"
        "def f():\n"
        "    from tracking_core.host_api import HostRun\n"
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
        "from tracking_core.rows import metric_rows\n"
        "run = tracking_core.start_run\n"
    )
    assert list(offences(good, tmp_path)) == []
    adapter = tmp_path / "slime_integration" / "tracking.py"
    adapter.parent.mkdir()
    adapter.write_text("from tracking_core.host_api import HostRun, no_such\nfrom tracking_core.rows import metric_rows\n")
    assert [line.split(": ", 1)[1] for line in offences(adapter, tmp_path, "adapters")] == [
        "tracking_core.host_api has no no_such",
        "from tracking_core.rows import metric_rows (use tracking_core.plugin_api or tracking_core.host_api)",
    ]


def test_the_plugin_api_is_sized_for_a_tracker() -> None:
    """``__all__`` is explicit, at most 25 names, and every name in it resolves; so does the
    host API's (its lazy names included)."""
    assert len(plugin_api.__all__) <= 25, plugin_api.__all__
    for module in (plugin_api, host_api):
        assert len(set(module.__all__)) == len(module.__all__)
        for name in module.__all__:
            assert getattr(module, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        getattr(host_api, "nothing_here")  # noqa: B009


def test_api_names_are_the_objects_the_core_uses() -> None:
    """Re-exports, not copies: a plugin's MetricRecord is the core's MetricRecord."""
    from tracking_core.config import to_plain
    from tracking_core.records import MetricRecord
    from tracking_core.registry import BackendRegistrar

    assert plugin_api.MetricRecord is MetricRecord
    assert plugin_api.BackendRegistrar is BackendRegistrar
    assert host_api.to_plain is to_plain
    assert plugin_api.hookimpl is tracking_core.hookimpl


def test_docs_list_every_name_of_both_apis() -> None:
    doc = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    section = doc.split("\n## The plugin API: `tracking_core.plugin_api`\n", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in [*plugin_api.__all__, *host_api.__all__] if f"`{name}`" not in section]
    assert not missing, f"docs/hooks.md's plugin API section lacks {missing}"
    # each module docstring is the same map
    for module in (plugin_api, host_api):
        assert not [name for name in module.__all__ if name not in (module.__doc__ or "")]
