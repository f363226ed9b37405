"""Load slime argument namespaces recorded as JSON, so tests can use slime's real args without slime.

slime is not on the package index and its parser needs sglang, Megatron and a model checkpoint, so
the tests use a recording instead: ``tests/fixtures/slime_ppo_args.json`` holds the ``base``
namespace slime's ``parse_args()`` produced for a PPO launch and the ``actor`` and ``critic``
namespaces its own ``parse_megatron_role_args`` made from it (``source`` says how).

Values JSON can hold are stored as they are. Others are tagged:

* ``{"__type__": "tuple" | "set" | "frozenset", "items": [...]}`` and non-finite floats
  ``{"__type__": "float", "repr": "inf"}`` are rebuilt into the real value here;
* everything else (``torch.dtype``, Megatron enums, ``signal.Signals``, slime dataclasses) stays
  the tagged dict ``{"__type__": "torch.dtype", "repr": "torch.float32"}``. Rebuilding them would
  need torch and Megatron; the tagged dict is enough for what the tests check (two namespaces are
  equal exactly when their tags are, and a config pipeline sees an opaque value either way).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from typing import Any

#: The namespaces a slime args recording holds.
NAMESPACES: tuple[str, ...] = ("base", "actor", "critic")

_CONTAINERS = {"tuple": tuple, "set": set, "frozenset": frozenset}


def decode_value(value: Any) -> Any:
    """One recorded value with the tags that can be rebuilt exactly (containers, floats) rebuilt."""
    if isinstance(value, list):
        return [decode_value(item) for item in value]
    if not isinstance(value, dict):
        return value
    tag = value.get("__type__")
    if tag in _CONTAINERS and isinstance(value.get("items"), list):
        return _CONTAINERS[tag](decode_value(item) for item in value["items"])
    if tag == "float" and isinstance(value.get("repr"), str):
        return float(value["repr"])
    if tag is not None:
        return value
    return {key: decode_value(item) for key, item in value.items()}


def load_fixture_namespaces(
    path: str | os.PathLike[str], names: Sequence[str] = NAMESPACES
) -> dict[str, argparse.Namespace]:
    """The recorded namespaces (``base``, ``actor``, ``critic`` by default) as ``argparse.Namespace``.

    Each call returns fresh objects, so a test may modify them. Raises ``ValueError`` naming the
    file and the namespace when the recording lacks one or it is not a JSON object.
    """
    path_str = os.fspath(path)
    with open(path_str, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise ValueError(
            f"{path_str}: a slime args recording is a JSON object with the keys "
            f"{', '.join(NAMESPACES)}, got {type(data).__name__}"
        )
    namespaces: dict[str, argparse.Namespace] = {}
    for name in names:
        recorded = data.get(name)
        if not isinstance(recorded, dict):
            raise ValueError(
                f"{path_str}: the recording has no {name!r} namespace (a JSON object of "
                f"argument name -> value); it has {', '.join(map(str, data)) or 'no keys'}"
            )
        namespaces[name] = argparse.Namespace(
            **{key: decode_value(item) for key, item in recorded.items()}
        )
    return namespaces
