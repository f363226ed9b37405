"""Redaction: every planted secret gone from every output, no real slime key touched."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracking_mlflow.keys import mlflow_params
from tracking_tensorboardx.hparams import tensorboard_hparams
from tracking_wandb.config import wandb_config

from tracking_core.config import (
    Redactor,
    build_section,
    classify_name,
    config_json,
    config_text,
    fingerprint,
    redact,
    redact_argv,
    redact_text,
    secrets,
)
from tracking_core.config.secrets import ALLOW_KEYS_ENV, PATTERNS_ENV, SECRET_KEYS_ENV

MARKER = re.compile(r"<redacted sha256:[0-9a-f]{8}>")

WANDB_KEY = "0123456789abcdef0123456789abcdef01234567"
CLI_WANDB_KEY = "fedcba9876543210fedcba9876543210fedcba98"
HF_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
SK_KEY = "sk-proj-Z9y8X7w6V5u4T3s2R1q0PoNmLkJi"
DB_PASSWORD = "s3cretPa55w0rd"
PLANTED = (WANDB_KEY, CLI_WANDB_KEY, HF_TOKEN, SK_KEY, DB_PASSWORD)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (PATTERNS_ENV, ALLOW_KEYS_ENV, SECRET_KEYS_ENV):
        monkeypatch.delenv(name, raising=False)


def plant(ns: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """Secrets put where a slime user could put them; returns the expected redacted paths."""
    ns = dict(ns)
    ns["wandb_key"] = WANDB_KEY  # slime's --wandb-key, a 40-hex W&B key
    ns["train_env_vars"] = {"HF_TOKEN": HF_TOKEN, "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    ns["sglang_model_loader_extra_config"] = json.dumps({"openai_api_base": "x", "note": SK_KEY})
    ns["router_redis_url"] = f"redis://default:{DB_PASSWORD}@redis.internal:6379/0"
    ns["launch_command"] = (
        f"python3 train.py --use-wandb --wandb-key {CLI_WANDB_KEY} --wandb-project p --lr 1e-6"
    )
    expected = {
        "wandb_key",
        "train_env_vars.HF_TOKEN",
        "sglang_model_loader_extra_config",
        "router_redis_url",
        "launch_command",
    }
    return ns, expected


@pytest.mark.parametrize(
    "name",
    [
        "wandb_key",
        "WANDB_API_KEY",
        "wandbApiKey",
        "api_key",
        "openai_api_key",
        "apikey",
        "hf_token",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "token",
        "auth_token",
        "access_token",
        "password",
        "db_password",
        "router_oracle_password",
        "dbpassword",
        "client_secret",
        "aws_secret_access_key",
        "credentials",
        "creds",
        "secret",
        "sglang_admin_api_key",
        "router_control_plane_api_keys",
        "private_key",
        "github_token",
        "hftoken",
        "MLFLOW_TRACKING_TOKEN",
        "MLFLOW_TRACKING_PASSWORD",
        "session_token",
    ],
)
def test_credential_names(name: str) -> None:
    assert classify_name(name) == "secret"


@pytest.mark.parametrize(
    "name",
    [
        "input_key",
        "label_key",
        "eval_input_key",
        "metadata_key",
        "tool_key",
        "fim_pad_token",
        "fim_eod_token",
        "key",
        "reward_key",
    ],
)
def test_names_secret_only_by_value(name: str) -> None:
    assert classify_name(name) == "maybe"
    redactor = Redactor()
    data, paths = redactor.redact({name: "prompt", "x": {name: "<|endoftext|>"}})
    assert paths == []
    data, paths = redactor.redact({name: "Xk29fj3KdQ8s0PzLm4Vb7TyR"})
    assert paths == [name]


@pytest.mark.parametrize(
    "name",
    [
        "router_tls_key_path",
        "router_client_key_path",
        "sglang_ssl_keyfile",
        "api_key_path",
        "password_file",
        "secret_name",
        "rollout_stop_token_ids",
        "linear_num_key_heads",
        "num_api_keys",
        "max_tokens_per_gpu",
        "use_auth_token",
        "tokenizer_model",
        "monkey",
        "keyboard",
        "allow_ambiguous_pad_tokens",
        "git_sha",
        "linear_key_head_dim",
        "lr",
    ],
)
def test_not_credential_names(name: str) -> None:
    assert classify_name(name) is None


def test_fixture_keys_are_never_redacted(tagged: dict[str, Any], helpers: Any) -> None:
    """None of slime's 1391 real keys is redacted, as loaded or as realistic objects."""
    for loaded in (tagged, helpers.load_realistic()):
        for name, ns in loaded.items():
            section = build_section(ns, None if name == "base" else name)
            assert section.report["redacted"] == [], name
            assert len(section.values) == 1391


def test_fixture_credential_like_keys_are_empty(tagged: dict[str, Any]) -> None:
    """The fixture's credential-like keys exist and are null/empty: that is why nothing is redacted."""
    base = tagged["base"]
    secret_names = sorted(k for k in base if classify_name(k) == "secret")
    assert secret_names == [
        "router_api_key",
        "router_control_plane_api_keys",
        "router_oracle_password",
        "sglang_admin_api_key",
        "sglang_api_key",
        "sglang_ssl_keyfile_password",
        "wandb_key",
    ]
    assert all(base[k] in (None, "", []) for k in secret_names)


@pytest.mark.parametrize("style", ["default", "slime"])
@pytest.mark.parametrize("namespace", ["base", "actor", "critic"])
def test_planted_secrets_appear_in_no_output(
    slime_args: dict[str, Any], namespace: str, style: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tracking_core")
    values, expected = plant(vars(slime_args[namespace]))
    role = None if namespace == "base" else namespace
    section = build_section(values, role, style)
    assert set(section.report["redacted"]) == expected
    mlflow = mlflow_params(section)
    hparams, left_out = tensorboard_hparams(section)
    outputs = [
        json.dumps(section.values),
        json.dumps(dict(section.params)),
        json.dumps(dict(section.report)),
        json.dumps(mlflow.params),
        json.dumps(wandb_config(section)),
        json.dumps(hparams),
        json.dumps(left_out),
        config_text(section),
        config_json(section),
        caplog.text,
    ]
    for output in outputs:
        for secret in PLANTED:
            assert secret not in output
    # What is not secret is still there.
    assert section.values["train_env_vars"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert "--wandb-project p --lr 1e-6" in section.values["launch_command"]
    assert section.values["router_redis_url"].startswith("redis://default:<redacted sha256:")
    assert section.values["router_redis_url"].endswith("@redis.internal:6379/0")
    assert MARKER.fullmatch(section.values["wandb_key"])


def test_fingerprint_compares_roles(slime_args: dict[str, Any]) -> None:
    actor, _ = plant(vars(slime_args["actor"]))
    critic, _ = plant(vars(slime_args["critic"]))
    critic["wandb_key"] = "f" * 40
    a = build_section(actor, "actor").values
    c = build_section(critic, "critic").values
    assert a["router_redis_url"] == c["router_redis_url"]
    assert a["wandb_key"] != c["wandb_key"]
    assert fingerprint(WANDB_KEY) == a["wandb_key"]
    assert Redactor(fingerprint=False).mask(WANDB_KEY) == "<redacted>"


def test_git_sha_is_not_a_secret() -> None:
    data, paths = redact({"git_commit": WANDB_KEY, "source": f"commit {WANDB_KEY}"})
    assert paths == []
    data, paths = redact({"api_key": WANDB_KEY})
    assert paths == ["api_key"]


def test_empty_null_and_bool_values_are_left() -> None:
    data = {"wandb_key": None, "api_key": "", "api_keys": [], "password": {}, "secret": False}
    assert redact(data) == (data, [])


def test_non_string_secrets_are_redacted_whole() -> None:
    data, paths = redact({"password": 123456, "api_keys": ["a", "b"], "credentials": {"u": "x"}})
    assert paths == ["api_keys", "credentials", "password"]
    assert all(MARKER.fullmatch(v) for v in data.values())


def test_redaction_is_idempotent() -> None:
    once, paths = redact({"wandb_key": WANDB_KEY, "cmd": f"--hf-token {HF_TOKEN}"})
    twice, again = redact(once)
    assert twice == once
    assert again == []


def test_input_is_not_modified() -> None:
    data = {"nested": {"api_key": "abc"}, "list": [{"password": "p"}]}
    before = json.dumps(data)
    out, paths = redact(data)
    assert json.dumps(data) == before
    assert paths == ["list[0].password", "nested.api_key"]


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"python train.py --wandb-key {WANDB_KEY} --lr 1", WANDB_KEY),
        (f"python train.py --wandb-key={WANDB_KEY}", WANDB_KEY),
        (f"python train.py --wandb_key '{WANDB_KEY}'", WANDB_KEY),
        (f"--hf-token {HF_TOKEN}", HF_TOKEN),
        ("--my-service-token Xk29fj3KdQ8s0PzLm4Vb7TyR", "Xk29fj3KdQ8s0PzLm4Vb7TyR"),
        ("--comet-key Xk29fj3KdQ8s0PzLm4Vb7TyR", "Xk29fj3KdQ8s0PzLm4Vb7TyR"),
        (f"export WANDB_API_KEY={WANDB_KEY} && run", WANDB_KEY),
        (f'{{"api_key": "{DB_PASSWORD}"}}', DB_PASSWORD),
        (f"password: {DB_PASSWORD}", DB_PASSWORD),
        (f"postgresql://user:{DB_PASSWORD}@db:5432/x", DB_PASSWORD),
        (f"see {HF_TOKEN} here", HF_TOKEN),
        (f"key={SK_KEY}", SK_KEY),
        ("ghp_" + "a1" * 18, "ghp_" + "a1" * 18),
        ("AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("Authorization: Bearer abcdef0123456789abcdef", "abcdef0123456789abcdef"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----", "MIIEabc"),
    ],
)
def test_redact_text(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out
    assert MARKER.search(out)


@pytest.mark.parametrize(
    "text",
    [
        "python train.py --input-key prompt --label-key label --fim-pad-token <fim_pad>",
        "/root/models/Qwen3-4B/",
        "localhost:4317",
        "https://huggingface.co/Qwen/Qwen3-4B",
        "slime.rollout.sglang_rollout.generate_rollout",
        "--tokenizer-model /root/models/x --router-tls-key-path /etc/k.pem",
        f"commit {WANDB_KEY}",
        "hf_checkpoint",
        "sk-learn",
    ],
)
def test_redact_text_leaves_ordinary_text(text: str) -> None:
    assert redact_text(text) == text


def test_redact_argv() -> None:
    argv = [
        "train.py",
        "--use-wandb",
        "--wandb-key",
        WANDB_KEY,
        "--hf-token=" + HF_TOKEN,
        "--input-key",
        "prompt",
        "--note",
        f"see {SK_KEY}",
        "--wandb-project",
        "p",
    ]
    out = redact_argv(argv)
    joined = " ".join(out)
    for secret in (WANDB_KEY, HF_TOKEN, SK_KEY):
        assert secret not in joined
    assert out[:3] == ["train.py", "--use-wandb", "--wandb-key"]
    assert MARKER.fullmatch(out[3])
    assert out[4].startswith("--hf-token=<redacted sha256:")
    assert out[5:7] == ["--input-key", "prompt"]
    assert out[-2:] == ["--wandb-project", "p"]
    assert redact_argv(["--wandb-key"]) == ["--wandb-key"]
    assert redact_argv(["--api-key", "--next"]) == ["--api-key", "--next"]


def test_user_patterns_and_secret_keys() -> None:
    redactor = Redactor(
        patterns=[r"corp-[0-9]{6}", r"pin=(?P<secret>\d+)"],
        secret_keys=[r"^internal_"],
        use_env=False,
    )
    data, paths = redactor.redact(
        {"a": "id corp-123456 here", "b": "pin=4321 ok", "internal_thing": "x", "c": "free"}
    )
    assert paths == ["a", "b", "internal_thing"]
    assert "corp-123456" not in data["a"]
    assert data["b"].startswith("pin=<redacted") and data["b"].endswith(" ok")
    assert data["c"] == "free"


def test_allow_keys() -> None:
    redactor = Redactor(allow_keys=["wandb_key", "nested.*"], use_env=False)
    data, paths = redactor.redact(
        {"wandb_key": "visible", "nested": {"password": "p"}, "password": "q"}
    )
    assert data["wandb_key"] == "visible"
    assert data["nested"] == {"password": "p"}
    assert paths == ["password"]


def test_environment_variables(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(PATTERNS_ENV, r"corp-\d{3\,6},[bad(regex")
    monkeypatch.setenv(ALLOW_KEYS_ENV, "api_key, other")
    monkeypatch.setenv(SECRET_KEYS_ENV, "tenant")
    with caplog.at_level(logging.WARNING, logger="tracking_core.config"):
        data, paths = redact(
            {"a": "corp-1234", "b": "x [bad(regex y", "api_key": "shown", "tenant_id": "t1"}
        )
    assert "not a valid regular expression" in caplog.text
    assert paths == ["a", "b", "tenant_id"]
    assert data["api_key"] == "shown"
    # A literal comma inside braces is part of the regex.
    monkeypatch.setenv(PATTERNS_ENV, r"zz\d{2,3}")
    assert redact({"v": "zz12"})[1] == ["v"]


def test_secret_shaped_mapping_keys_are_redacted() -> None:
    data, paths = redact({HF_TOKEN: 1, "ok": 2})
    assert HF_TOKEN not in json.dumps(data)
    assert len(paths) == 1 and MARKER.fullmatch(paths[0])
    section = build_section({"m": {HF_TOKEN: (1, 2)}}, "actor")
    assert HF_TOKEN not in json.dumps(dict(section.report))


token_chars = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
tokens = st.one_of(
    st.lists(token_chars, min_size=34, max_size=40).map(lambda c: "hf_" + "".join(c)),
    st.lists(token_chars, min_size=24, max_size=40).map(lambda c: "sk-" + "".join(c)),
    st.lists(token_chars, min_size=36, max_size=36).map(lambda c: "ghp_" + "".join(c)),
)
plain_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10))
plain_data = st.recursive(
    plain_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(plain_data, tokens, st.sampled_from(["{}", "x {} y", "--token {}", "a={}", "u://me:{}@h"]))
def test_property_token_anywhere_is_redacted(data: Any, token: str, template: str) -> None:
    text = template.format(token)
    wrapped = {"payload": data, "where": [data, {"deep": text}]}
    out, paths = redact(wrapped)
    assert token not in json.dumps(out)
    assert "where[1].deep" in paths
    json.dumps(out, allow_nan=False)


# -- the quick skip of name-based matching -------------------------------------------------------
def test_the_quick_check_looks_for_every_secret_name_part() -> None:
    for part in secrets.SECRET_NAME_PARTS:
        assert secrets.Redactor._may_name_secret(f"x_{part.upper()}=1"), part
    assert not secrets.Redactor._may_name_secret("lr=1e-6 --model /root/x")


def test_every_word_of_the_name_rule_holds_a_secret_name_part() -> None:
    """The skip is only as good as this: a word added to the rule must hold one of the parts."""
    words = (*secrets._STRONG_EXACT, *secrets._STRONG_SUFFIXES, *secrets._NOUNS, *secrets._PASS_NOUNS)
    assert [w for w in words if not any(p in w for p in secrets.SECRET_NAME_PARTS)] == []


name_words = st.sampled_from(
    sorted(
        {
            *secrets._STRONG_EXACT,
            *secrets._STRONG_SUFFIXES,
            *secrets._NOUNS,
            *secrets._QUALIFIERS,
            *secrets._SERVICES,
            *secrets._REFERENCE_AFTER,
            *secrets._NOT_SECRET_FIRST,
            *secrets._PASS_NOUNS,
            *secrets._PASS_OWNERS,
            "lr", "seed", "model", "Pass", "KEY", "Token", "x", "value", "ratio",
        }
    )
)
names = st.builds(
    lambda words, seps, upper: "".join(
        (w.upper() if upper else w) + s for w, s in zip(words, seps, strict=False)
    ),
    st.lists(name_words, min_size=1, max_size=4),
    st.lists(st.sampled_from(["_", "-", ".", "", ""]), min_size=4, max_size=4),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(names)
def test_property_a_name_that_can_hide_a_value_holds_a_part(name: str) -> None:
    if classify_name(name) is not None:
        assert any(p in name.lower() for p in secrets.SECRET_NAME_PARTS), name


values = st.one_of(
    tokens,
    st.sampled_from([DB_PASSWORD, WANDB_KEY, "0.5", "prompt", "'quoted value'", '"x y"', "1e-6"]),
)
fragments = st.one_of(
    st.builds(lambda n, sep, v: f"{n}{sep}{v}", names, st.sampled_from(["=", ": ", " = ", ":"]), values),
    st.builds(lambda n, sep, v: f"--{n}{sep}{v}", names, st.sampled_from([" ", "="]), values),
    st.sampled_from(["def f(x):\n    y = x * 2\n", "{'a': 1, 'b': 2}", "see https://h.io/p", "2+2=4", " "]),
    st.text(max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(fragments, min_size=1, max_size=8).map(" ".join))
def test_property_skipping_name_matching_changes_nothing(text: str) -> None:
    """The quick skip gives what matching every ``name = value`` and ``--name value`` gives."""
    quick = Redactor(use_env=False)
    full = Redactor(use_env=False)
    full._may_name_secret = lambda text: True  # type: ignore[method-assign]
    assert quick.redact_text(text) == full.redact_text(text)


# -- the value shapes, one test per row of docs/secrets.md's table --------------------------------
DOCS = Path(__file__).resolve().parents[2] / "docs" / "secrets.md"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PGP = "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBGRk\n-----END PGP PRIVATE KEY BLOCK-----"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----"
JWT = (
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)

#: (shape, example, the secret in it, what must be kept): the docs' table, row by row.
SHAPES: list[tuple[str, Any, str, tuple[str, ...]]] = [
    ("Hugging Face token", HF_TOKEN, HF_TOKEN, ()),
    ("OpenAI-style key", SK_KEY, SK_KEY, ()),
    ("GitHub token", "ghp_" + "a1" * 18, "ghp_" + "a1" * 18, ()),
    ("GitLab token", "glpat-x9Y8z7W6v5U4t3S2r1Q0", "x9Y8z7W6v5U4t3S2r1Q0", ()),
    ("Stripe-style key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc", ()),
    ("AWS access key id", "AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP", ()),
    ("Slack token", "xoxb-1234567890-abcdefghij", "1234567890-abcdefghij", ()),
    ("Google API key", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "SyA1234567890abcdefghij", ()),
    ("JWT", JWT, "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", ()),
    ("PEM private key", PEM, "MIIEabc", ()),
    ("PGP private key", PGP, "lQOYBGRk", ()),
    (
        "URL password",
        f"postgresql://user:{DB_PASSWORD}@db:5432/x",
        DB_PASSWORD,
        ("postgresql://user:", "@db:5432/x"),
    ),
    (
        "URL password holding `@` or `/`",
        "https://user:p@ss/w0rd@host/x",
        "ss/w0rd",
        ("https://user:", "@host/x"),
    ),
    (
        "URL query parameter",
        "https://h/x?token=T0kenValue123&page=2",
        "T0kenValue123",
        ("https://h/x?token=", "&page=2"),
    ),
    (
        "Bearer token",
        "Authorization: Bearer abcdef0123456789abcdef",
        "abcdef0123456789abcdef",
        ("Authorization: Bearer ",),
    ),
    ("Authorization header", "Authorization: token ghs0123abc", "ghs0123abc", ("Authorization: token ",)),
    ("Basic credentials", "Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy", ("Basic ",)),
    (
        "flag with a value",
        f"python train.py --wandb-key {WANDB_KEY} --lr 1",
        WANDB_KEY,
        ("python train.py --wandb-key ", " --lr 1"),
    ),
    ("flag with `=`", "--db-pass=hunter2hunter2", "hunter2", ("--db-pass=",)),
    (
        "assignment",
        "export MYSQL_PWD=hunter2hunter2 && run",
        "hunter2",
        ("export MYSQL_PWD=", " && run"),
    ),
    ("quoted field", f'{{"api_key": "{DB_PASSWORD}"}}', DB_PASSWORD, ('{"api_key": "',)),
    ("flag then value, as list items", ["--wandb-key", WANDB_KEY], WANDB_KEY, ("--wandb-key",)),
    (
        "variable then value, as list items",
        ["AWS_SECRET_ACCESS_KEY", AWS_SECRET],
        AWS_SECRET,
        ("AWS_SECRET_ACCESS_KEY",),
    ),
]


def _docs_rows() -> list[tuple[str, Any]]:
    """(shape, example) of each row of docs/secrets.md's value-shape table."""
    text = DOCS.read_text()
    section = text.split("## By value shape", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith("| shape"):
            continue
        shape, example, _kept = (cell.strip() for cell in line.strip("|").split(" | "))
        code = example.strip("`")
        rows.append((shape, json.loads(code) if code.startswith("[") else code.replace("\\n", "\n")))
    return rows


def test_the_docs_table_and_the_tests_table_are_the_same() -> None:
    assert _docs_rows() == [(shape, example) for shape, example, _, _ in SHAPES]


@pytest.mark.parametrize(("shape", "example", "secret", "kept"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_value_shape_is_redacted(shape: str, example: Any, secret: str, kept: tuple[str, ...]) -> None:
    if isinstance(example, list):
        outputs = [redact({"v": example})[0]["v"], redact([example])[0][0]]
        if example[0].startswith("--"):
            outputs.append(redact_argv(example))
        for out in outputs:
            assert out[0] == example[0] and MARKER.fullmatch(out[1]), out
    else:
        out = redact_text(example)
        # everywhere a string goes: a config value, a list item, a key, a record's name
        config, paths = redact({"v": example, "l": ["x", example], example: 1})
        assert paths and secret not in json.dumps(config)
        assert secrets.redact_name(example) == out
        assert redact_text(out) == out  # idempotent
        assert MARKER.search(out), out
        outputs = [out]
    for out in outputs:
        assert secret not in json.dumps(out), out
        for part in kept:
            assert part in (out if isinstance(out, str) else out[0]), (part, out)


@pytest.mark.parametrize(
    "text",
    [
        "pass_k=8",
        "eval/pass@k: 0.5",
        "PWD=/home/user/run",
        "forward_pass: 3",
        "Basic concepts and Basic information",
        "Authorization: required for every call",
        "see https://huggingface.co/Qwen/Qwen3-4B?revision=main",
        "redis://redis.internal:6379/0",
        "git+https://github.com/org/repo@v1.0",
        "https://h/x?page=2&sort=asc",
    ],
)
def test_new_shapes_leave_ordinary_text(text: str) -> None:
    assert redact_text(text) == text


def test_lists_of_lower_case_words_are_not_pairs() -> None:
    data = {"columns": ["input_ids", "token", "attention_mask"], "pass_k": 8, "forward_pass": 2}
    assert redact(data) == (data, [])


def test_db_pass_names() -> None:
    for name in ("DB_PASS", "MYSQL_PWD", "db-pass", "redis_pass", "POSTGRES_PWD", "admin_pass"):
        assert classify_name(name) == "secret", name
    for name in ("pass", "pass_k", "PWD", "forward_pass", "pass_rate", "two_pass"):
        assert classify_name(name) is None, name


def test_names_are_cached_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor(use_env=False)
    name = f"https://user:{DB_PASSWORD}@host/x"
    first = redactor.names[name]
    assert DB_PASSWORD not in first and first is redactor.names[name]
    assert redactor.names[1] == "1" and redactor.names[True] == "True"  # 1 == True as dict keys
    monkeypatch.setattr(secrets.RedactedNames, "MAX_NAMES", 3)
    for i in range(10):
        assert redactor.names[f"m{i}"] == f"m{i}"
        assert len(redactor.names) <= 3


def test_a_redactor_pickles_and_redacts_the_same_afterwards() -> None:
    """A host may hand its redactor to another process (multiprocessing, Ray): it pickles, its
    key cache included, and redacts alike after."""
    import pickle

    from tracking_core.config.secrets import Redactor

    redactor = Redactor(secret_keys=["my_field"])
    config = {"api_key": "sk-" + "a" * 40, "my_field": "plain", "lr": 1e-3}
    before = redactor.redact(config)
    again = pickle.loads(pickle.dumps(redactor))
    assert again.redact(config) == before
    assert before[0]["my_field"] != "plain" and before[0]["lr"] == 1e-3
