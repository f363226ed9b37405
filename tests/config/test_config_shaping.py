"""Backend shapes: MLflow's own validators accept every key and value; nothing dropped silently."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracking_mlflow.keys import (
    MLFLOW_MAX_PARAM_LENGTH,
    MlflowKeyShaper,
    mlflow_key,
    mlflow_params,
    shape_mlflow_keys,
)
from tracking_tensorboardx.hparams import tensorboard_hparams
from tracking_wandb.config import wandb_config

from tracking_core.config import build_section, config_json, config_text
from tracking_core.records import ConfigSection

validation = pytest.importorskip("mlflow.utils.validation")
from mlflow.entities import Param  # noqa: E402

# Metric names slime and Megatron log, plus some MLflow refuses as they are.
METRIC_KEYS = [
    "train/pg_loss",
    "train/critic-value_loss",
    "rollout/raw_reward",
    "passrate/pass@1",
    "passrate/pass@16",
    "eval/aime24",
    "eval/aime24-truncated_ratio",
    "perf/tokens_per_gpu_per_sec",
    "train/step",
    "rollout/step",
    "actor/train/step",
    "multi-turn/len(response)",
    "a//b",
    "/lead",
    "trail/",
    "../up",
    "a/./b",
    "a/../b",
    ".",
    "..",
    "...x",
    "",
    "x" * 300,
    "key,with=bad#chars",
    "résumé/ü",
    "tab\there",
    "new\nline",
    "colon:ok",
    "sp ace",
]


def validate_param(key: str, value: str) -> None:
    """Everything MLflow checks for a param before it is stored (no silent truncation)."""
    validation._validate_param_name(key)
    validation._validate_length_limit("Param key", validation.MAX_ENTITY_KEY_LENGTH, key)
    validation._validate_length_limit("Param value", validation.MAX_PARAM_VAL_LENGTH, value)
    validation._validate_param(key, value)


def all_sections(loaded: dict[str, Any]) -> list[ConfigSection]:
    sections = []
    for style in ("default", "slime"):
        for name, ns in loaded.items():
            sections.append(build_section(ns, None if name == "base" else name, style))
    return sections


def test_fixture_passes_mlflow_validation(
    slime_args: dict[str, Any], tagged: dict[str, Any]
) -> None:
    for loaded in (slime_args, tagged):
        for section in all_sections(loaded):
            shaped = mlflow_params(section)
            assert len(shaped.params) == len(section.params)
            assert shaped.renamed == {} and shaped.truncated == []
            for key, value in shaped.params.items():
                validate_param(key, value)
            for batch in shaped.batches():
                params = [Param(k, v) for k, v in batch.items()]
                validation._validate_batch_log_limits([], params, [])
                validation._validate_param_keys_unique(params)
                validation._validate_batch_log_data([], params, [])
                request = json.dumps({"params": [{"key": k, "value": v} for k, v in batch.items()]})
                validation._validate_batch_log_api_req(request)
            merged: dict[str, str] = {}
            for batch in shaped.batches():
                merged.update(batch)
            assert merged == shaped.params


def test_fixture_values_as_text(slime_args: dict[str, Any]) -> None:
    params = mlflow_params(build_section(slime_args["actor"], "actor")).params
    assert params["actor/lr"] == "1e-06"
    assert params["actor/kl_coef"] == "0.0"
    assert params["actor/input_key"] == "prompt"
    assert params["actor/wandb_key"] == "null"
    assert params["actor/use_kl_loss"] == "true"
    assert params["actor/cp_comm_type"] == '["p2p"]'
    assert params["actor/exit_signal"] == "Signals.SIGTERM"


def _h(key: str) -> str:
    """The suffix every renamed key ends with: ``--`` and 8 hex digits of its SHA-256."""
    return "--" + hashlib.sha256(key.encode()).hexdigest()[:8]


@pytest.mark.parametrize("key", METRIC_KEYS)
def test_metric_and_param_keys(key: str) -> None:
    shaped = mlflow_key(key)
    validation._validate_metric_name(shaped)
    validation._validate_param_name(shaped)
    validation._validate_length_limit("Metric name", validation.MAX_ENTITY_KEY_LENGTH, shaped)
    assert shaped == key or shaped.endswith(_h(key))  # renamed keys carry the key's hash
    assert mlflow_key(key) == shaped  # the same way every time


def test_shaped_key_rule() -> None:
    assert mlflow_key("passrate/pass@1") == "passrate/pass_at_1" + _h("passrate/pass@1")
    assert mlflow_key("critic/lr") == "critic/lr"
    assert mlflow_key("a//b") == "a/b" + _h("a//b")
    assert mlflow_key("/a/") == "a" + _h("/a/")
    assert mlflow_key("../x") == "__/x" + _h("../x")
    assert mlflow_key("a/./b") == "a/_/b" + _h("a/./b")
    assert mlflow_key("...x") == "_...x" + _h("...x")
    assert mlflow_key("") == "_" + _h("")
    assert mlflow_key("a,b=c") == "a_b_c" + _h("a,b=c")
    assert mlflow_key("résumé") == "résumé"
    # A valid key that ends like a renamed one is renamed too: no rename can land on it.
    assert mlflow_key("x--deadbeef") == "x--deadbeef" + _h("x--deadbeef")
    assert mlflow_key("x--deadbee") == "x--deadbee"
    long_a, long_b = "k" * 260 + "a", "k" * 260 + "b"
    assert len(mlflow_key(long_a)) == 250
    assert mlflow_key(long_a) != mlflow_key(long_b)
    assert mlflow_key(long_a) == "k" * 240 + _h(long_a)


def test_collisions_stay_distinct(caplog: pytest.LogCaptureFixture) -> None:
    given = ["a@b", "a_at_b", "x,y", "x;y", "x_y", "acc/top-1!", "acc/top-1?", "acc/top-1_", "a//b", "a/b"]
    keys = shape_mlflow_keys(given)
    assert len(set(keys.values())) == len(given)
    assert keys["a_at_b"] == "a_at_b" and keys["x_y"] == "x_y" and keys["a/b"] == "a/b"
    # One key at a time, in any order, in any process: the same names.
    assert keys == {k: mlflow_key(k) for k in reversed(given)}
    section = ConfigSection(None, "launch", "", {}, {"a@b": 1, "a_at_b": 2})
    with caplog.at_level(logging.WARNING, logger="tracking_core.mlflow"):
        shaped = mlflow_params(section)
    assert len(shaped.params) == 2
    assert list(shaped.renamed) == ["a@b"]
    assert "'a@b' ->" in caplog.text


def test_metric_key_shaper_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    shaper = MlflowKeyShaper()
    with caplog.at_level(logging.WARNING, logger="tracking_core.mlflow"):
        for _ in range(3):
            assert shaper("passrate/pass@1") == "passrate/pass_at_1" + _h("passrate/pass@1")
            assert shaper("train/pg_loss") == "train/pg_loss"
    assert caplog.text.count("passrate/pass@1") == 1
    assert shaper.renamed == {"passrate/pass@1": "passrate/pass_at_1" + _h("passrate/pass@1")}


def test_long_values_are_cut_with_a_marker_and_kept_whole(caplog: pytest.LogCaptureFixture) -> None:
    long = "x" * 10_000
    nested = {"layers": list(range(3000))}
    section = build_section({"prompt": long, "table": nested, "short": "s"}, "actor")
    with caplog.at_level(logging.WARNING, logger="tracking_core.mlflow"):
        shaped = mlflow_params(section)
    assert shaped.truncated == ["actor/prompt", "actor/table"]
    for key, value in shaped.params.items():
        validate_param(key, value)
    cut = shaped.params["actor/prompt"]
    assert len(cut) == MLFLOW_MAX_PARAM_LENGTH
    assert cut.endswith("[truncated from 10000 chars; full value in config/actor.json]")
    assert "actor/prompt" in caplog.text and "actor/table" in caplog.text
    doc = json.loads(config_json(section))
    assert doc["values"]["prompt"] == long
    assert doc["values"]["table"] == nested


def test_batches_respect_count_and_size() -> None:
    section = build_section({f"k{i}": "v" * 5000 for i in range(450)}, None)
    shaped = mlflow_params(section)
    batches = shaped.batches()
    assert all(len(b) <= 100 for b in batches)
    assert all(sum(len(k) + len(v) for k, v in b.items()) < 1_000_000 for b in batches)
    assert sum(len(b) for b in batches) == 450
    assert [len(b) for b in shaped.batches(size=1000)] == [len(b) for b in batches]
    assert len(mlflow_params(build_section({"a": 1, "b": 2}, None)).batches(size=1)) == 2


def test_wandb_config(slime_args: dict[str, Any]) -> None:
    actor = build_section(slime_args["actor"], "actor", "slime")
    config = wandb_config(actor)
    assert config["lr"] == 1e-6 and "actor/lr" not in config
    assert config["eval_datasets"][0]["name"] == "aime24"
    assert wandb_config(build_section(slime_args["critic"], "critic", "slime"))["critic/lr"] == 1e-5
    assert wandb_config(build_section(slime_args["base"], None, "slime")) == {}


def test_tensorboard_hparams_name_every_key(
    slime_args: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    section = build_section(slime_args["critic"], "critic")
    # named at INFO: the keys are not lost, the config text beside the hparams holds them all
    with caplog.at_level(logging.INFO, logger="tracking_core.backends.tensorboard"):
        hparams, left_out = tensorboard_hparams(section)
    assert all(type(v) in (bool, int, float, str) for v in hparams.values())
    left_keys = {item.split(": ", 1)[0] for item in left_out}
    assert set(hparams) | left_keys == set(section.params)
    assert not set(hparams) & left_keys
    assert "critic/wandb_key: null" in " ".join(left_out)
    assert "critic/eval_datasets: list value" in " ".join(left_out)
    for key in left_keys:
        assert key in caplog.text


def test_config_text(slime_args: dict[str, Any]) -> None:
    section = build_section({**vars(slime_args["actor"]), "wandb_key": "0" * 40}, "actor")
    text = config_text(section)
    for key in section.params:
        assert f"| `{key}` |" in text
    assert "#### redacted (1)" in text
    assert "0" * 40 not in text
    assert "| `actor/lr` | `1e-06` |" in text
    assert '| `actor/fim_eod_token` | `"<\\|endoftext\\|>"` |' in text
    assert "AttnBackend.flash" in text


def test_config_json_is_lossless_and_ascii(slime_args: dict[str, Any]) -> None:
    section = build_section({**vars(slime_args["base"]), "note": "résumé ✓"}, None, "slime")
    text = config_json(section)
    assert text.isascii()
    doc = json.loads(text)
    assert doc["values"] == dict(section.values)
    assert doc["report"] == dict(section.report)
    assert (doc["namespace"], doc["role"], doc["prefix"], doc["logged_as_params"]) == (
        "launch",
        None,
        "",
        False,
    )
    assert doc["values"]["note"] == "résumé ✓"


def test_hand_built_section_with_odd_values_still_shapes() -> None:
    section = ConfigSection(
        "actor",
        "actor",
        "actor/",
        {"x": float("nan")},
        {"actor/x": float("nan"), "actor/s": {1, 2}},
    )
    assert json.loads(config_json(section))["values"]["x"] == "nan"
    params = mlflow_params(section).params
    assert params["actor/x"] == '"nan"' and params["actor/s"] == "[1, 2]"


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=300))
def test_property_any_key_is_valid_for_mlflow(key: str) -> None:
    shaped = mlflow_key(key)
    validation._validate_metric_name(shaped)
    validation._validate_param_name(shaped)
    assert len(shaped) <= 250
    if (
        validation.validate_param_and_metric_name(key)
        and not validation.path_not_unique(key)
        and 0 < len(key) <= 250
        and "\n" not in key
        and not re.search(r"--[0-9a-f]{8}$", key)
    ):
        assert shaped == key
    else:
        assert shaped.endswith(_h(key))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab@/.,_ -", max_size=6), max_size=12, unique=True))
def test_property_distinct_keys_stay_distinct(keys: list[str]) -> None:
    # Each key's renamed form is among the keys too: a rename never lands on a key as given.
    keys = list(dict.fromkeys(keys + [mlflow_key(k) for k in keys]))
    shaped = {k: mlflow_key(k) for k in keys}
    assert len(set(shaped.values())) == len(keys)
    for value in shaped.values():
        validation._validate_param_name(value)
