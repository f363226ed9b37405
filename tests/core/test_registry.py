"""Registration as data: ``register(Backend(...))``.

Bad registrations are refused with a message that says what to write, and a plugin whose
registration fails is reported by name while the others load.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tracking_core.plugin_api import Backend, BackendRegistrar, RunContext, hookimpl
from tracking_core.plugins import get_plugin_manager, reset_plugin_manager


def where(run: RunContext) -> dict[str, Any]:
    return {"dir": str(run.tracking_dir)}


def _registered(call: Any, plugin: str = "acme-plugin") -> BackendRegistrar:
    register = BackendRegistrar(plugin=plugin, distribution="tracking-core-acme")
    call(register)
    return register


def test_new_form_is_kept_whole() -> None:
    register = _registered(
        lambda r: r(
            Backend(
                "acme",
                "tracking_jsonl.backend:JsonlBackend",
                requires=["json"],
                extra="acme",
                description="an acme backend",
                max_batch=900,
                batch_interval=2.0,
                target=where,
                terminal=True,
            )
        )
    )
    spec = register.specs["acme"]
    assert (spec.plugin, spec.distribution) == ("acme-plugin", "tracking-core-acme")
    assert spec.requires == ("json",)  # a list given, a tuple kept: the spec is frozen
    assert (spec.max_batch, spec.batch_interval) == (900, 2.0)
    assert spec.resolve_target() is where and spec.terminal and spec.missing() == []
    assert spec.resolve_factory().__name__ == "JsonlBackend"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    # every field the plugin gave is carried: a field added to Backend later needs no copy code
    given = Backend("acme", "m:f", max_batch=5)
    kept = _registered(lambda r: r(given)).specs["acme"]
    assert {f.name: getattr(kept, f.name) for f in dataclasses.fields(Backend)} == {
        f.name: getattr(given, f.name) for f in dataclasses.fields(Backend)
    }


@pytest.mark.parametrize(
    ("call", "error", "says"),
    [
        (lambda r: r(Backend("", "m:f")), ValueError, "invalid backend name ''"),
        (lambda r: r(Backend("a,b", "m:f")), ValueError, "without commas"),
        (lambda r: r(Backend(" a", "m:f")), ValueError, "surrounding spaces"),
        (lambda r: r(Backend("a", "no-colon")), TypeError, "'module:attribute' string"),
        (lambda r: r(Backend("a", 42)), TypeError, "factory must be a callable"),
        (lambda r: r(Backend("a", "m:f", requires="mlflow")), TypeError, r"write requires=\('mlflow',\)"),
        (lambda r: r(Backend("a", "m:f", requires=[1])), TypeError, "import names"),
        (lambda r: r(Backend("a", "m:f", target="nowhere")), TypeError, "target must be"),
        (lambda r: r(Backend("a", "m:f", views=object())), TypeError, "views must be"),
        (lambda r: Backend("a", "m:f", max_batch=0), ValueError, "1 or more"),
        (lambda r: Backend("a", "m:f", max_batch=2.5), ValueError, "whole number"),
        (lambda r: Backend("a", "m:f", batch_interval=-1), ValueError, "0 or more"),
        (lambda r: r("a"), TypeError, r"takes a Backend\(name, factory, ...\)"),
    ],
)
def test_bad_registrations_say_what_to_write(call: Any, error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says):
        _registered(call)


class _Good:
    @hookimpl
    def register_backends(self, register: BackendRegistrar) -> None:
        register(Backend("good-backend", "tracking_jsonl.backend:JsonlBackend"))


class _Bad:
    @hookimpl
    def register_backends(self, register: BackendRegistrar) -> None:
        register(Backend("bad backend,", "tracking_jsonl.backend:JsonlBackend"))


@pytest.fixture
def manager() -> Iterator[Any]:
    reset_plugin_manager()
    manager = get_plugin_manager()
    try:
        yield manager
    finally:
        reset_plugin_manager()


def test_a_bad_registration_leaves_out_that_plugin_alone(
    manager: Any, caplog: pytest.LogCaptureFixture
) -> None:
    manager.register(_Bad(), "bad-plugin")
    manager.register(_Good(), "good-plugin")
    with caplog.at_level(logging.WARNING, logger="tracking_core.plugins"):
        backends = manager.backends
    assert "good-backend" in backends and "jsonl" in backends
    assert "'bad-plugin' failed to register its backends" in caplog.text
    assert "invalid backend name" in manager.plugins["bad-plugin"].error


def test_built_in_plugins_register_their_backends(manager: Any) -> None:
    backends = manager.backends
    assert {"jsonl", "mlflow", "console"} <= set(backends)
    assert (backends["mlflow"].max_batch, backends["mlflow"].batch_interval) == (900, 2.0)
    assert backends["console"].terminal


def test_docs_show_the_registration_signatures() -> None:
    """docs/hooks.md's `register(...)` section shows Backend's exact fields."""
    import inspect
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "hooks.md").read_text(encoding="utf-8")
    section = doc.split("## `register(...)`, the callback of `register_backends`\n", 1)[1]
    block = section.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    params = ", ".join(
        f"{p.name}: {p.annotation}" + ("" if p.default is p.empty else " = " + (
            "Views()" if p.name == "views" else repr(p.default)))
        for p in inspect.signature(Backend).parameters.values()
    )
    assert f"Backend({params})" in block, "docs/hooks.md shows another Backend"
    assert "register(backend: Backend) -> None" in block
