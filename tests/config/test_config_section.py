"""build_section: the key convention of DESIGN.md ("One writer per namespace")."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from tracking_core.config import KEY_STYLES, build_section, key_prefix
from tracking_core.records import ConfigSection

CONFIG = {"lr": 1e-5, "eval": {"n": 1, "names": ["a"]}, "tp": 2}


@pytest.mark.parametrize(
    ("role", "style", "namespace", "prefix", "keys"),
    [
        (None, "default", "launch", "", {"lr", "eval", "tp"}),
        ("actor", "default", "actor", "actor/", {"actor/lr", "actor/eval", "actor/tp"}),
        ("critic", "default", "critic", "critic/", {"critic/lr", "critic/eval", "critic/tp"}),
        ("rollout", "default", "rollout", "rollout/", {"rollout/lr", "rollout/eval", "rollout/tp"}),
        (None, "slime", "launch", "", set()),
        ("actor", "slime", "actor", "", {"lr", "eval", "tp"}),
        ("critic", "slime", "critic", "critic/", {"critic/lr", "critic/eval", "critic/tp"}),
        ("rollout", "slime", "rollout", "rollout/", {"rollout/lr", "rollout/eval", "rollout/tp"}),
    ],
)
def test_key_convention(
    role: str | None, style: str, namespace: str, prefix: str, keys: set[str]
) -> None:
    section = build_section(argparse.Namespace(**CONFIG), role, style)
    assert isinstance(section, ConfigSection)
    assert (section.role, section.namespace, section.prefix) == (role, namespace, prefix)
    assert set(section.params) == keys
    # The namespace is always complete, whatever goes to params.
    assert dict(section.values) == {"eval": {"n": 1, "names": ["a"]}, "lr": 1e-5, "tp": 2}
    # A nested value stays one value.
    if keys:
        assert section.params[prefix + "eval"] == {"n": 1, "names": ["a"]}
    assert key_prefix(role, style) == prefix


def test_invalid_style_and_roles() -> None:
    assert KEY_STYLES == ("default", "slime")
    with pytest.raises(ValueError, match="unknown config key style 'wandb'"):
        build_section({}, "actor", "wandb")
    for role in ("", "launch"):
        with pytest.raises(ValueError, match="invalid role"):
            build_section({}, role)


def test_report_is_plain_json(slime_args: dict[str, Any]) -> None:
    section = build_section(slime_args["actor"], "actor")
    report = json.loads(json.dumps(dict(section.report)))
    assert set(report) == {"conversions", "redacted"}
    assert report["redacted"] == []
    by_path = {c["path"]: c for c in report["conversions"]}
    assert by_path["attention_backend"]["to"] == "str"
    assert by_path["params_dtype"]["from_type"] == "torch.dtype"
    assert section.params["actor/attention_backend"] == "AttnBackend.flash"
    assert section.params["actor/params_dtype"] == "torch.bfloat16"


def test_same_values_from_tagged_and_realistic(
    tagged: dict[str, Any], slime_args: dict[str, Any]
) -> None:
    a = build_section(tagged["critic"], "critic")
    b = build_section(slime_args["critic"], "critic")
    assert set(a.values) == set(b.values)
    differing = {k for k in a.values if a.values[k] != b.values[k]}
    # Only the tagged values differ (a tag dict versus the converted object).
    assert all("__type__" in json.dumps(tagged["critic"][k]) for k in differing)
