"""Meta-tests that keep the contract honest: every hook documented and tested."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from tracking_core import hookspecs
from tracking_core.plugins import PluginManager

ROOT = Path(__file__).resolve().parents[2]
#: The hooks as the plugin manager knows them (not a hand-kept list).
HOOK_NAMES = sorted(name for name in dir(PluginManager().pm.hook) if not name.startswith("_"))


def test_every_hookspec_is_a_hook() -> None:
    declared = {
        name
        for name, obj in vars(hookspecs).items()
        if callable(obj) and hasattr(obj, "tracking_core_spec")
    }
    assert declared == set(HOOK_NAMES)


def test_every_hook_has_a_docstring_and_no_body() -> None:
    for name in HOOK_NAMES:
        func = getattr(hookspecs, name)
        assert func.__doc__ and func.__doc__.strip(), name
        source = inspect.getsource(func)
        body = source.split('"""')[-1].strip()
        assert body == "", f"hookspec {name} has a body: {body!r}"


def test_every_hook_has_a_test() -> None:
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    tested = set(re.findall(r"def (test_hook_\w+)", sources))
    for name in HOOK_NAMES:
        assert any(t == f"test_hook_{name}" or t.startswith(f"test_hook_{name}_") for t in tested), (
            f"no test_hook_{name} test"
        )
