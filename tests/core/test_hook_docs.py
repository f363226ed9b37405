"""Every hook of the contract is documented in docs/hooks.md with its exact signature, taken from
the plugin manager's ``pm.hook`` (not a hand-kept list): a new hook cannot go undocumented, and a
changed signature or docstring shows up here."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from tracking_core import hookspecs
from tracking_core.plugins import PluginManager

DOC = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"


def _hooks() -> dict[str, Any]:
    pm = PluginManager().pm
    out = {}
    for name in dir(pm.hook):
        spec = getattr(getattr(pm.hook, name), "spec", None)
        if spec is not None:
            out[name] = spec
    return out


def _signature(name: str, function: Any) -> str:
    """``name(arg: Type, ...) -> Return`` with the annotations as written in hookspecs.py."""
    sig = inspect.signature(function)
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"{name}({params}) -> {sig.return_annotation}"


HOOKS = _hooks()


def test_the_contract_is_read_from_the_plugin_manager() -> None:
    assert {"register_backends", "log_metrics", "close_run"} <= set(HOOKS)
    # every hookspec function in the module is a hook the manager knows
    specs = {n for n, f in vars(hookspecs).items() if inspect.isfunction(f) and hasattr(f, "tracking_core_spec")}
    assert specs == set(HOOKS)


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_hook_is_documented_with_its_exact_signature(name: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    spec = HOOKS[name]
    signature = _signature(name, spec.function)
    block = doc.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert signature in block, f"docs/hooks.md lacks `{signature}` in its signature list"
    section = doc.split(f"\n## {name}\n", 1)
    assert len(section) == 2, f"docs/hooks.md has no `## {name}` section"
    body = section[1].split("\n## ", 1)[0]
    assert f"def {signature}" in body, f"the `## {name}` section shows another signature"
    first_line = (inspect.getdoc(spec.function) or "").splitlines()[0]
    assert first_line and first_line in body, f"the `## {name}` section lacks its docstring"


def test_no_documented_hook_is_stale() -> None:
    doc = DOC.read_text(encoding="utf-8")
    block = doc.split("```text\n", 1)[1].split("```", 1)[0]
    listed = re.findall(r"^(\w+)\(", block, re.M)
    assert sorted(listed) == sorted(HOOKS)
    sections = re.findall(r"^## (\w+)$", doc, re.M)
    assert sorted(sections) == sorted(HOOKS), "a `## hook` section names no hook of the contract"
