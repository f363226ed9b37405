"""Helpers for the config pipeline tests: the slime fixture, loaded two ways.

``tests/fixtures/slime_ppo_args.json`` holds the ``base``, ``actor`` and ``critic`` namespaces
that slime's own parser produced, with every non-JSON value tagged as
``{"__type__": "<module.qualname>", "repr": "..."}`` (tuples and sets as ``{"__type__":
"tuple", "items": [...]}``). :func:`realistic` turns the tags back into objects of the same kind
as the originals (a real Enum class named ``AttnBackend``, the real ``signal.Signals``, a
dtype-like object whose type lives in module ``torch``, a dataclass ``EvalDatasetConfig``), so the
pipeline sees what it sees in a slime job, without importing torch, megatron or slime.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import json
import signal
import types
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ARGS_FIXTURE = FIXTURES / "slime_ppo_args.json"
NAMESPACES = ("base", "actor", "critic")


@lru_cache(maxsize=1)
def _raw_text() -> str:
    return ARGS_FIXTURE.read_text(encoding="utf-8")


def load_tagged() -> dict[str, dict[str, Any]]:
    """The three namespaces as stored: tagged dicts left as they are (a fresh copy each call)."""
    data = json.loads(_raw_text())
    return {name: data[name] for name in NAMESPACES}


class _TorchDtype:
    """Looks like ``torch.dtype`` to duck typing: type named ``dtype`` in module ``torch``."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return self._text


_TorchDtype.__name__ = _TorchDtype.__qualname__ = "dtype"
_TorchDtype.__module__ = "torch"


def _enum_from_repr(type_path: str, text: str) -> enum.Enum:
    # "<AttnBackend.flash: 1>"
    inner = text.strip("<>")
    qualified, _, raw_value = inner.partition(": ")
    cls_name, _, member = qualified.partition(".")
    cls = _enum_class(type_path, cls_name, member, ast.literal_eval(raw_value))
    return cls[member]


@cache
def _enum_class(type_path: str, cls_name: str, member: str, value: Any) -> type[enum.Enum]:
    cls = enum.Enum(cls_name, {member: value})
    cls.__module__ = type_path.rpartition(".")[0]
    return cls


@cache
def _dataclass_type(type_path: str, fields: tuple[str, ...]) -> type:
    module, _, name = type_path.rpartition(".")
    cls = dataclasses.make_dataclass(name, [(f, Any) for f in fields])
    cls.__module__ = module
    return cls


def _dataclass_from_repr(type_path: str, text: str) -> Any:
    call = ast.parse(text, mode="eval").body
    assert isinstance(call, ast.Call)
    kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    cls = _dataclass_type(type_path, tuple(kwargs))
    return cls(**kwargs)


def realistic(value: Any) -> Any:
    """``value`` with every ``__type__`` tag turned back into an object of that kind."""
    if isinstance(value, list):
        return [realistic(v) for v in value]
    if not isinstance(value, dict):
        return value
    tag = value.get("__type__")
    if tag is None:
        return {k: realistic(v) for k, v in value.items()}
    if tag in ("tuple", "set", "frozenset"):
        items = [realistic(v) for v in value["items"]]
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "float":
        return float(value["repr"])
    if tag == "torch.dtype":
        return _TorchDtype(value["repr"])
    if tag == "signal.Signals":
        name = value["repr"].strip("<>").split(":")[0].split(".")[1]
        return signal.Signals[name]
    if tag.endswith("enums.AttnBackend") or value["repr"].startswith("<"):
        return _enum_from_repr(tag, value["repr"])
    if "(" in value["repr"]:
        return _dataclass_from_repr(tag, value["repr"])
    raise AssertionError(f"fixture tag not handled: {tag}")


def load_realistic() -> dict[str, dict[str, Any]]:
    """The three namespaces with realistic objects in place of the tags."""
    return {name: realistic(ns) for name, ns in load_tagged().items()}


def as_namespace(values: dict[str, Any]) -> argparse.Namespace:
    """A namespace as slime hands it over (``args``)."""
    return argparse.Namespace(**values)


def walk_strings(data: Any) -> list[str]:
    """Every key and string value in plain data (to search outputs for secrets)."""
    out: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            out.append(str(key))
            out.extend(walk_strings(value))
    elif isinstance(data, (list, tuple)):
        for value in data:
            out.extend(walk_strings(value))
    elif isinstance(data, str):
        out.append(data)
    return out


@pytest.fixture(scope="session")
def helpers() -> types.SimpleNamespace:
    """This module's helpers, for test modules (conftest is not importable under importlib mode)."""
    return types.SimpleNamespace(
        load_tagged=load_tagged,
        load_realistic=load_realistic,
        realistic=realistic,
        as_namespace=as_namespace,
        walk_strings=walk_strings,
    )


@pytest.fixture
def tagged() -> dict[str, dict[str, Any]]:
    """base/actor/critic as stored, tags left as dicts."""
    return load_tagged()


@pytest.fixture
def slime_args() -> dict[str, argparse.Namespace]:
    """base/actor/critic as argparse Namespaces holding realistic objects."""
    return {name: as_namespace(ns) for name, ns in load_realistic().items()}
