"""diff_configs and `tracking-core diff`: the actor-vs-critic difference of the slime fixture."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tracking_core.config import Change, build_section, config_json, diff_command, diff_configs

EXPECTED = [
    "disable_param_buffers_cpu_backup",
    "kl_coef",
    "lr",
    "untie_embeddings_and_output_weights",
]


def test_fixture_actor_vs_critic(tagged: dict[str, Any], slime_args: dict[str, Any]) -> None:
    for actor, critic in (
        (tagged["actor"], tagged["critic"]),
        (vars(slime_args["actor"]), vars(slime_args["critic"])),
        (
            build_section(slime_args["actor"], "actor").values,
            build_section(slime_args["critic"], "critic").values,
        ),
    ):
        result = diff_configs(actor, critic)
        assert result.keys == EXPECTED
        assert result.added == {} and result.removed == {}
        assert result.type_changes == ["kl_coef"]
        assert result.changed["kl_coef"] == Change(0.0, 0, "type")
        assert result.changed["lr"] == Change(1e-6, 1e-5, "value")
        assert result.changed["untie_embeddings_and_output_weights"] == Change(False, True, "value")
        assert result.changed["disable_param_buffers_cpu_backup"] == Change(True, False, "value")


def test_fixture_base_vs_actor_is_empty(tagged: dict[str, Any]) -> None:
    assert not diff_configs(tagged["base"], tagged["actor"])


def test_added_removed_nested_and_types() -> None:
    a = {"x": 1, "gone": 2, "n": {"a": 1, "b": [0.0]}, "flag": True, "nan": float("nan"), "s": "1"}
    b = {"x": 1.0, "new": 3, "n": {"a": 2, "b": [0]}, "flag": 1, "nan": float("nan"), "s": 1}
    result = diff_configs(a, b)
    assert result.added == {"new": 3}
    assert result.removed == {"gone": 2}
    assert {k: c.kind for k, c in result.changed.items()} == {
        "flag": "type",
        "n.a": "value",
        "n.b": "type",
        "s": "type",
        "x": "type",
    }
    json.dumps(result.as_dict())


def test_format_table() -> None:
    result = diff_configs(
        {"lr": 1e-6, "kl_coef": 0.0, "old": "x" * 100}, {"lr": 1e-5, "kl_coef": 0, "new": None}
    )
    table = result.format_table("actor", "critic", width=20)
    lines = table.splitlines()
    assert lines[0].split() == ["key", "change", "actor", "critic"]
    assert re.search(r"^kl_coef\s+type\s+0\.0 \(float\)\s+0 \(int\)$", table, re.M)
    assert "0 (int)" in table
    assert '"xxxxxxxxxxxxxxxxxx…' in table
    assert "(absent)" in table
    # kl_coef 0.0 vs 0 is the same number: listed apart, below, and not in the headline
    assert "3 difference(s) between actor and critic (not counted, listed below: 1 numeric type-only change(s))" in lines
    assert lines[-5:-3] == ["", "The same number in another type: 1"]
    assert lines[-1].split()[:2] == ["kl_coef", "type"]
    assert diff_configs({}, {}).format_table("a", "b") == "no differences between a and b\n"


def _save_run(run_dir: Path, slime_args: dict[str, Any]) -> None:
    (run_dir / "config").mkdir(parents=True)
    for name, role in (("base", None), ("actor", "actor"), ("critic", "critic")):
        section = build_section(slime_args[name], role)
        (run_dir / "config" / f"{section.namespace}.json").write_text(config_json(section))


def test_diff_command(
    tmp_path: Path, slime_args: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    tracking_dir = tmp_path / "tracking-runs"
    run_dir = tracking_dir / "runs" / "run-0123abcd"
    _save_run(run_dir, slime_args)

    assert diff_command("run-0123abcd", ["actor", "critic"], str(tracking_dir)) == 0
    out = capsys.readouterr().out
    real = out.split("\n\n")[0].splitlines()[2:]  # the first table: the real differences
    assert [line.split()[0] for line in real] == [k for k in EXPECTED if k != "kl_coef"]
    assert "3 difference(s) between actor and critic (not counted, listed below: 1 numeric type-only change(s))" in out

    assert diff_command(str(run_dir), ["actor", "critic"], "/nonexistent", exit_code=True) == 1
    capsys.readouterr()
    assert diff_command("run-0123", ["launch", "actor"], str(tracking_dir), exit_code=True) == 0
    assert "no differences between launch and actor" in capsys.readouterr().out

    assert diff_command("run-0123abcd", ["launch", "actor", "critic"], str(tracking_dir)) == 0
    out = capsys.readouterr().out
    # three roles: one row per key not the same in all of them, a column per role
    assert out.splitlines()[0].split() == ["key", "launch", "actor", "critic"]
    assert "key(s) not the same in launch, actor, critic" in out


def test_diff_command_errors(
    tmp_path: Path, slime_args: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    tracking_dir = tmp_path / "t"
    assert diff_command("missing", ["actor", "critic"], str(tracking_dir)) == 2
    assert "no run 'missing'" in capsys.readouterr().err
    _save_run(tracking_dir / "runs" / "r1", slime_args)
    assert diff_command("r1", ["actor", "rollout"], str(tracking_dir)) == 2
    err = capsys.readouterr().err
    assert "'rollout'" in err and "actor, critic, launch" in err
    assert diff_command("r1", ["actor"], str(tracking_dir)) == 2
    (tracking_dir / "runs" / "r1" / "config" / "bad.json").write_text("{not json")
    assert diff_command("r1", ["actor", "bad"], str(tracking_dir)) == 2
    assert "not a JSON config artifact" in capsys.readouterr().err
