"""Role args from --megatron-config-path: the adapter must give each role exactly what slime gives it.

The reference is tests/fixtures/slime_ppo_args.json: the namespaces slime's real parser and its own
``parse_megatron_role_args`` produced from tests/fixtures/slime_megatron_roles.yaml.
"""

from __future__ import annotations

import argparse
import copy
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from slime_integration.fixture_args import decode_value, load_fixture_namespaces
from slime_integration.role_args import (
    CRITIC_FORCED_SETTINGS,
    RoleConfigError,
    apply_role_overrides,
    load_role_overrides,
    resolve_role_args,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ARGS_JSON = FIXTURES / "slime_ppo_args.json"
ROLES_YAML = FIXTURES / "slime_megatron_roles.yaml"
LOGGER = "tracking_core.slime.role_args"


def resolve(base: argparse.Namespace, path: Any, roles: Any = ("actor", "critic")) -> dict:
    """The adapter's own rules, whatever slime-like package another test left importable."""
    return resolve_role_args(base, path, roles, prefer_slime=False)


def write_yaml(tmp_path: Path, text: str, name: str = "roles.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def assert_identical(actual: Any, expected: Any, where: str) -> None:
    """Equal *and* of the same type all the way down (``0 == 0.0`` and ``1 == True`` would pass ==)."""
    assert type(actual) is type(expected), (
        f"{where}: {actual!r} ({type(actual).__name__}) vs {expected!r} ({type(expected).__name__})"
    )
    if isinstance(expected, dict):
        assert list(actual) == list(expected), f"{where}: keys differ"
        for key in expected:
            assert_identical(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{where}: lengths differ"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_identical(a, e, f"{where}[{i}]")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def assert_same_namespace(
    actual: argparse.Namespace, expected: argparse.Namespace, role: str
) -> None:
    got, want = vars(actual), vars(expected)
    assert sorted(set(got) - set(want)) == [], f"{role}: keys slime did not produce"
    assert sorted(set(want) - set(got)) == [], f"{role}: keys missing"
    for key in want:
        assert_identical(got[key], want[key], f"{role}.{key}")


@pytest.fixture
def recorded() -> dict[str, argparse.Namespace]:
    return load_fixture_namespaces(ARGS_JSON)


@pytest.fixture
def base() -> argparse.Namespace:
    """A small launch namespace with the attributes slime's critic settings touch."""
    return argparse.Namespace(
        lr=2e-6,
        min_lr=0.0,
        seed=1234,
        tensor_model_parallel_size=1,
        kl_coef=0.1,
        use_kl_loss=False,
        use_opd=True,
        custom_advantage_function_path="my.adv",
        untie_embeddings_and_output_weights=False,
        disable_param_buffers_cpu_backup=True,
        sequence_parallel=False,
        load=None,
        num_gpus_per_node=8,
        eval_datasets=[{"name": "aime", "path": "/data/aime.jsonl"}],
    )


# --- the fixture: slime's own results ---------------------------------------------------------


def test_fixture_loader_gives_the_three_recorded_namespaces(recorded):
    assert set(recorded) == {"base", "actor", "critic"}
    for name, namespace in recorded.items():
        assert isinstance(namespace, argparse.Namespace)
        assert len(vars(namespace)) == 1391, name
    # Values JSON cannot hold stay as their tag: equality is all the tests need.
    assert recorded["base"].params_dtype == {"__type__": "torch.dtype", "repr": "torch.bfloat16"}
    assert recorded["base"].megatron_config_path == "slime_megatron_roles.yaml"
    # Fresh objects on every call, so a test may modify them.
    again = load_fixture_namespaces(ARGS_JSON)
    assert again["base"] is not recorded["base"]
    assert vars(again["base"]) == vars(recorded["base"])


def test_fixture_loader_rebuilds_containers_and_floats_and_names_missing_namespaces(tmp_path):
    assert decode_value({"__type__": "tuple", "items": [1, {"__type__": "set", "items": [2]}]}) == (
        1,
        {2},
    )
    assert decode_value({"__type__": "float", "repr": "inf"}) == float("inf")
    assert decode_value({"a": [{"__type__": "frozenset", "items": ["x"]}]}) == {
        "a": [frozenset({"x"})]
    }
    path = tmp_path / "args.json"
    path.write_text('{"base": {"lr": 1e-06}, "actor": {}}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"args\.json: the recording has no 'critic' namespace"):
        load_fixture_namespaces(path)
    assert vars(load_fixture_namespaces(path, names=("base",))["base"]) == {"lr": 1e-06}


def test_resolver_reproduces_slimes_actor_and_critic_exactly(recorded):
    resolved = resolve(recorded["base"], ROLES_YAML)

    assert list(resolved) == ["actor", "critic"]
    assert_same_namespace(resolved["actor"], recorded["actor"], "actor")
    assert_same_namespace(resolved["critic"], recorded["critic"], "critic")
    # The differences that matter, spelled out (types included: slime sets an int 0 on a float key).
    assert resolved["actor"].lr == 1e-6 and type(resolved["actor"].lr) is float
    assert resolved["critic"].lr == 1e-5 and type(resolved["critic"].lr) is float
    assert type(recorded["base"].kl_coef) is float
    assert resolved["critic"].kl_coef == 0 and type(resolved["critic"].kl_coef) is int
    assert resolved["critic"].untie_embeddings_and_output_weights is True
    assert resolved["critic"].disable_param_buffers_cpu_backup is False
    assert recorded["base"].disable_param_buffers_cpu_backup is True


def test_resolver_does_not_touch_the_launch_namespace(recorded):
    before = copy.deepcopy(vars(recorded["base"]))
    resolved = resolve(recorded["base"], ROLES_YAML)
    assert vars(recorded["base"]) == before
    assert resolved["actor"] is not recorded["base"]
    assert resolved["critic"] is not recorded["base"]
    # Deep copies: changing a role's nested value leaves the launch args alone.
    resolved["critic"].eval_datasets.append("x")
    assert vars(recorded["base"]) == before


def test_resolves_only_the_roles_asked_for(recorded):
    resolved = resolve(recorded["base"], ROLES_YAML, roles=("critic",))
    assert list(resolved) == ["critic"]
    assert_same_namespace(resolved["critic"], recorded["critic"], "critic")
    with pytest.raises(ValueError, match="'rollout'.*actor, critic"):
        resolve(recorded["base"], ROLES_YAML, roles=("actor", "rollout"))


# --- the file format ---------------------------------------------------------------------------


def test_load_role_overrides_reads_the_fixture():
    assert load_role_overrides(ROLES_YAML) == {"critic": {"lr": "1e-5"}, "actor": {"lr": "1e-6"}}


def test_args_is_accepted_in_place_of_overrides(tmp_path, base):
    path = write_yaml(
        tmp_path,
        """
        megatron:
          - {name: default, role: actor, args: {lr: 3e-6}}
          - {name: default, role: critic, overrides: {}, args: {seed: 7}}
        """,
    )
    assert load_role_overrides(path) == {"actor": {"lr": "3e-6"}, "critic": {"seed": 7}}
    resolved = resolve(base, path)
    assert resolved["actor"].lr == 3e-6
    assert resolved["critic"].seed == 7


def test_overrides_wins_over_args_with_a_warning(tmp_path, base, caplog):
    path = write_yaml(
        tmp_path,
        """
        megatron:
          - {role: actor, overrides: {lr: 3e-6}, args: {seed: 7}}
        """,
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        resolved = resolve(base, path)
    assert resolved["actor"].lr == 3e-6
    assert resolved["actor"].seed == base.seed
    assert "both 'overrides' and 'args'" in caplog.text


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("lr", "1e-5", 1e-5),  # YAML 1.1 reads this as a string
        ("lr", "'0.5'", 0.5),
        ("min_lr", "1E-7", 1e-7),
        ("seed", "'42'", 42),
        ("tensor_model_parallel_size", "'2'", 2),
        ("sequence_parallel", "'true'", True),
        ("use_kl_loss", "'yes'", True),
        ("disable_param_buffers_cpu_backup", "'false'", False),
    ],
)
def test_numeric_strings_take_the_launch_values_type(tmp_path, base, key, text, expected):
    path = write_yaml(
        tmp_path, f"megatron:\n  - role: actor\n    overrides:\n      {key}: {text}\n"
    )
    actor = resolve(base, path, roles=("actor",))["actor"]
    assert getattr(actor, key) == expected
    assert type(getattr(actor, key)) is type(expected)


def test_values_slime_does_not_coerce_are_kept_as_written(tmp_path, base, caplog):
    path = write_yaml(
        tmp_path,
        """
        megatron:
          - role: actor
            overrides:
              seed: 1e3            # not an int: stays the string, with a warning
              lr: 1                # YAML int on a float key: slime keeps the int
              load: /ckpt/actor    # launch value None: no type to follow
              use_opd: off         # already a YAML bool
        """,
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        actor = resolve(base, path, roles=("actor",))["actor"]
    assert actor.seed == "1e3"
    assert actor.lr == 1 and type(actor.lr) is int
    assert actor.load == "/ckpt/actor"
    assert actor.use_opd is False
    assert "'seed'='1e3' does not convert to int" in caplog.text


def test_unknown_keys_warn_and_are_set_anyway(tmp_path, base, caplog):
    path = write_yaml(
        tmp_path,
        """
        megatron:
          - role: critic
            overrides:
              my_new_flag: 3
              tensor-model-parallel-size: 2
        """,
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        critic = resolve(base, path, roles=("critic",))["critic"]
    assert critic.my_new_flag == 3
    assert getattr(critic, "tensor-model-parallel-size") == 2
    assert critic.tensor_model_parallel_size == 1
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("critic override 'my_new_flag' is not a known argument" in m for m in messages)
    assert any("did you mean 'tensor_model_parallel_size'" in m for m in messages)


def test_num_nodes_and_num_gpus_per_node_are_skipped(tmp_path, base, caplog):
    path = write_yaml(
        tmp_path,
        """
        megatron:
          - role: actor
            overrides: {num_nodes: 4, num_gpus_per_node: 2, lr: 1e-6}
        """,
    )
    with caplog.at_level(logging.INFO, logger=LOGGER):
        actor = resolve(base, path, roles=("actor",))["actor"]
    assert not hasattr(actor, "num_nodes")
    assert actor.num_gpus_per_node == 8
    assert actor.lr == 1e-6
    assert "ignoring actor override 'num_nodes'" in caplog.text
    assert "ignoring actor override 'num_gpus_per_node'" in caplog.text


def test_a_role_absent_from_the_file_inherits_the_launch_args(tmp_path, base):
    path = write_yaml(tmp_path, "megatron:\n  - {role: critic, overrides: {lr: 1e-5}}\n")
    resolved = resolve(base, path)
    assert vars(resolved["actor"]) == vars(base)
    assert resolved["actor"] is not base

    path = write_yaml(tmp_path, "megatron:\n  - {role: actor, overrides: {lr: 1e-6}}\n", "a.yaml")
    critic = resolve(base, path)["critic"]
    assert critic.lr == base.lr
    # The critic inherits, then still gets slime's forced settings.
    for key, value in CRITIC_FORCED_SETTINGS:
        assert getattr(critic, key) == value
    assert critic.disable_param_buffers_cpu_backup is False


def test_critic_forced_settings_win_over_the_file(tmp_path, base):
    assert [key for key, _ in CRITIC_FORCED_SETTINGS] == [
        "kl_coef",
        "use_opd",
        "custom_advantage_function_path",
        "untie_embeddings_and_output_weights",
    ]
    path = write_yaml(
        tmp_path,
        """
        megatron:
          - role: critic
            overrides:
              kl_coef: 0.5
              use_opd: true
              custom_advantage_function_path: my.critic.adv
              untie_embeddings_and_output_weights: false
          - role: actor
            overrides: {kl_coef: 0.5}
        """,
    )
    resolved = resolve(base, path)
    critic = resolved["critic"]
    assert critic.kl_coef == 0 and type(critic.kl_coef) is int
    assert critic.use_opd is False
    assert critic.custom_advantage_function_path is None
    assert critic.untie_embeddings_and_output_weights is True
    assert critic.disable_param_buffers_cpu_backup is False
    # The actor gets none of that.
    actor = resolved["actor"]
    assert actor.kl_coef == 0.5
    assert actor.use_opd is True
    assert actor.custom_advantage_function_path == "my.adv"
    assert actor.untie_embeddings_and_output_weights is False
    assert actor.disable_param_buffers_cpu_backup is True


@pytest.mark.parametrize("value", [True, False])
def test_the_file_may_set_disable_param_buffers_cpu_backup_for_the_critic(tmp_path, base, value):
    base.disable_param_buffers_cpu_backup = not value
    path = write_yaml(
        tmp_path,
        f"megatron:\n  - role: critic\n    overrides: {{disable_param_buffers_cpu_backup: {str(value).lower()}}}\n",
    )
    assert resolve(base, path)["critic"].disable_param_buffers_cpu_backup is value


def test_without_a_file_roles_get_what_slimes_runtime_gives_them(base):
    resolved = resolve_role_args(base, None)
    assert vars(resolved["actor"]) == vars(base)
    assert resolved["actor"] is not base
    # slime's create_training_models: deepcopy(args) + disable_param_buffers_cpu_backup=False only.
    expected = dict(vars(base), disable_param_buffers_cpu_backup=False)
    assert vars(resolved["critic"]) == expected
    assert base.disable_param_buffers_cpu_backup is True


def test_apply_role_overrides_does_not_modify_its_inputs(base):
    before = copy.deepcopy(vars(base))
    overrides = {"lr": "1e-5", "eval_datasets": []}
    critic = apply_role_overrides(base, overrides, "critic")
    assert vars(base) == before
    assert overrides == {"lr": "1e-5", "eval_datasets": []}
    assert critic.lr == 1e-5


# --- malformed files ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", r"top-level 'megatron' list, got an empty file"),
        ("lr: 1e-5\n", r"top-level 'megatron' list, got top-level keys lr"),
        ("- role: actor\n", r"top-level 'megatron' list, got top-level list"),
        (
            "critic:\n  - {overrides: {lr: 1e-5}}\n",
            r"older format: move it into an entry with role: critic",
        ),
        ("megatron: {role: actor}\n", r"'megatron' must be a list of role entries, got dict"),
        ("megatron:\n  - {role: actor}\n  - critic\n", r"megatron entry 1 must be a mapping"),
        (
            "megatron:\n  - {role: critic}\n  - {role: actor}\n  - {role: critic}\n",
            r"megatron entries 0 and 2 both have role 'critic'.*merge",
        ),
        (
            "megatron:\n  - {role: actor, overrides: [lr, 1e-5]}\n",
            r"megatron entry 0 \(role 'actor'\): 'overrides' must be a mapping",
        ),
        (
            "megatron:\n  - {role: actor, args: 3}\n",
            r"entry 0 \(role 'actor'\): 'args' must be a mapping",
        ),
        (
            "megatron:\n  - {role: actor, overrides: {1: 2}}\n",
            r"entry 0 \(role 'actor'\): override key 1 is of type int, not a string",
        ),
        ("megatron: [\n", r"not valid YAML"),
    ],
)
def test_malformed_files_raise_errors_that_say_where_and_what_to_do(tmp_path, base, text, match):
    path = write_yaml(tmp_path, text, "bad.yaml")
    with pytest.raises(RoleConfigError, match=match) as raised:
        resolve(base, path)
    assert str(path) in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_a_missing_file_names_the_flag(tmp_path, base):
    with pytest.raises(
        RoleConfigError, match=r"nope\.yaml: cannot read the --megatron-config-path file"
    ):
        resolve(base, tmp_path / "nope.yaml")


def test_entries_for_other_roles_and_unknown_fields_warn(tmp_path, base, caplog):
    path = write_yaml(
        tmp_path,
        """
        megatron:
          - {role: ref, overrides: {lr: 1}}
          - {role: actor, overide: {lr: 1e-6}}
        """,
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        resolved = resolve(base, path)
    assert resolved["actor"].lr == base.lr
    assert "entry 0 has role 'ref', which slime does not resolve" in caplog.text
    assert "entry 1 (role 'actor') has unknown field(s) overide" in caplog.text


@pytest.mark.parametrize("role_line", ["", "role: null", "role: ''"])
def test_an_entry_without_a_role_is_ignored_as_slime_ignores_it(
    tmp_path, recorded, caplog, role_line
):
    """slime picks entries with ``entry.get("role") == role``: a role-less entry applies to no
    role, so slime's own results for the fixture file (recorded) are the results for this file."""
    extra = "{name: forgotten, overrides: {lr: 3e-4, seed: 7}" + (f", {role_line}" if role_line else "") + "}"
    text = ROLES_YAML.read_text(encoding="utf-8") + f"  - {extra}\n"
    path = write_yaml(tmp_path, text)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        resolved = resolve(recorded["base"], path)
        resolve(recorded["base"], path)  # read again (once per role in a job): no second warning
    assert_same_namespace(resolved["actor"], recorded["actor"], "actor")
    assert_same_namespace(resolved["critic"], recorded["critic"], "critic")
    warnings = [r.getMessage() for r in caplog.records if "has no 'role'" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert str(path) in warnings[0]
    assert "megatron entry 2 (name 'forgotten', overrides: lr, seed)" in warnings[0]
    assert "add role: actor or role: critic" in warnings[0]
    assert load_role_overrides(path) == {"critic": {"lr": "1e-5"}, "actor": {"lr": "1e-6"}}


def test_a_file_with_only_role_less_entries_leaves_every_role_inherited(tmp_path, base, caplog):
    path = write_yaml(tmp_path, "megatron:\n  - {name: a, overrides: {lr: 1}}\n  - {overrides: {seed: 2}}\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        resolved = resolve(base, path)
    assert resolved["actor"].lr == base.lr and resolved["critic"].seed == base.seed
    assert caplog.text.count("has no 'role'") == 2
    assert "entry 0 (name 'a', overrides: lr)" in caplog.text
    assert "entry 1 (name None, overrides: seed)" in caplog.text


def test_missing_pyyaml_says_how_to_install_it(tmp_path, base, monkeypatch):
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(ImportError, match="pip install pyyaml"):
        resolve(base, ROLES_YAML)


# --- slime's own function, when slime is importable ----------------------------------------------


@pytest.fixture
def stand_in_slime(tmp_path, monkeypatch):
    """Put a minimal ``slime`` package first on sys.path; restore every ``slime.*`` module after."""

    def make(arguments_source: str) -> Path:
        root = tmp_path / "site"
        package = root / "slime" / "utils"
        package.mkdir(parents=True)
        (root / "slime" / "__init__.py").write_text("", encoding="utf-8")
        (package / "__init__.py").write_text("", encoding="utf-8")
        (package / "arguments.py").write_text(textwrap.dedent(arguments_source), encoding="utf-8")
        monkeypatch.syspath_prepend(str(root))
        return root

    saved = {n: m for n, m in sys.modules.items() if n == "slime" or n.startswith("slime.")}
    for name in saved:
        del sys.modules[name]
    yield make
    for name in [n for n in sys.modules if n == "slime" or n.startswith("slime.")]:
        del sys.modules[name]
    sys.modules.update(saved)


def test_slimes_own_function_is_used_when_slime_is_importable(stand_in_slime, base):
    stand_in_slime(
        """
        import copy
        calls = []

        def parse_megatron_role_args(base_args, megatron_config_path, role):
            calls.append((megatron_config_path, role))
            out = copy.deepcopy(base_args)
            out.made_by = "slime"
            return out
        """
    )
    resolved = resolve_role_args(base, ROLES_YAML)
    import slime.utils.arguments as stand_in

    assert stand_in.calls == [(str(ROLES_YAML), "actor"), (str(ROLES_YAML), "critic")]
    assert resolved["actor"].made_by == resolved["critic"].made_by == "slime"
    assert not hasattr(base, "made_by")
    # prefer_slime=False keeps the adapter's own rules.
    assert not hasattr(resolve(base, ROLES_YAML)["actor"], "made_by")


def test_the_file_is_validated_before_slime_sees_it(stand_in_slime, tmp_path, base):
    stand_in_slime(
        """
        def parse_megatron_role_args(base_args, megatron_config_path, role):
            raise AssertionError("slime should not be reached")
        """
    )
    path = write_yaml(tmp_path, "megatron:\n  - {role: actor}\n  - {role: actor}\n")
    with pytest.raises(RoleConfigError, match="entries 0 and 1 both have role 'actor'"):
        resolve_role_args(base, path)


def test_a_slime_that_does_not_import_falls_back_to_the_adapters_rules(
    stand_in_slime, recorded, caplog
):
    stand_in_slime("raise ImportError('sglang is not installed')\n")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        resolved = resolve_role_args(recorded["base"], ROLES_YAML)
    assert_same_namespace(resolved["critic"], recorded["critic"], "critic")
    assert "slime.utils.arguments does not import (sglang is not installed)" in caplog.text


def test_a_string_that_is_no_boolean_on_a_bool_key_follows_slime_with_a_warning(
    tmp_path, base, caplog
):
    path = write_yaml(tmp_path, "megatron:\n  - {role: actor, overrides: {use_kl_loss: 'maybe'}}\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        actor = resolve(base, path, roles=("actor",))["actor"]
    assert actor.use_kl_loss is True
    assert "'use_kl_loss'='maybe' is not a boolean for a bool argument; read as True" in caplog.text
