"""The config diff lists per-launch values (ports, run ids, pids, hosts, timestamps) and
numeric type-only changes apart, below the real differences, and counts only the real ones in
its headline; the data keeps every difference."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tracking_core.config import diff_configs
from tracking_core.config.diff import is_volatile

# What the built-in collectors add to each role of one job (two torchrun groups): per launch.
ACTOR_ENV = {
    "env/MASTER_PORT": "29500", "env/TORCHELASTIC_RUN_ID": "a1b2", "env/MASTER_ADDR": "127.0.0.1",
    "parallel/host": "node1", "rollout_worker_pid": 4242, "start_timestamp": 1796000000.5,
}  # fmt: skip
CRITIC_ENV = {
    "env/MASTER_PORT": "29617", "env/TORCHELASTIC_RUN_ID": "c3d4", "env/MASTER_ADDR": "10.0.0.2",
    "parallel/host": "node2", "rollout_worker_pid": 4343, "start_timestamp": 1796000001.25,
}  # fmt: skip


@pytest.mark.parametrize(
    "key",
    ["env/MASTER_PORT", "env/TORCHELASTIC_RUN_ID", "MASTER_ADDR", "worker_pid", "parallel/host",
     "env/SLURM_JOB_ID", "sglang_router_port", "router_ip", "a.b.hostname", "created_at"],
)  # fmt: skip
def test_volatile_keys(key: str) -> None:
    assert is_volatile(key)


@pytest.mark.parametrize(
    "key", ["lr", "report", "transport", "support_port_x", "skip", "kl_coef", "hosts_file", "ship"]
)
def test_real_keys_are_not_volatile(key: str) -> None:
    assert not is_volatile(key)


def _with_env(tagged: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    actor, critic = copy.deepcopy(tagged["actor"]), copy.deepcopy(tagged["critic"])
    actor.update(ACTOR_ENV)
    critic.update(CRITIC_ENV)
    return actor, critic


def test_fixture_groups(tagged: dict[str, Any]) -> None:
    actor, critic = _with_env(tagged)
    result = diff_configs(actor, critic)
    assert result.volatile == sorted(ACTOR_ENV)
    assert result.numeric_type_only == ["kl_coef"]
    assert result.real == ["disable_param_buffers_cpu_backup", "lr", "untie_embeddings_and_output_weights"]
    # the data keeps everything
    assert set(result.keys) == {*result.real, *result.volatile, "kl_coef"}
    data = result.as_dict()
    assert data["changed"]["env/MASTER_PORT"] == {"old": "29500", "new": "29617", "kind": "value"}
    assert data["volatile"] == sorted(ACTOR_ENV) and data["numeric_type_only"] == ["kl_coef"]


def test_fixture_table_real_first_groups_below(tagged: dict[str, Any]) -> None:
    actor, critic = _with_env(tagged)
    lines = diff_configs(actor, critic).format_table("actor", "critic").splitlines()
    headline = next(i for i, line in enumerate(lines) if "difference(s)" in line)
    assert lines[headline] == (
        "3 difference(s) between actor and critic (not counted, listed below: "
        "6 per-launch value(s), 1 numeric type-only change(s))"
    )
    above = [line.split()[0] for line in lines[2 : headline - 1]]
    assert above == ["disable_param_buffers_cpu_backup", "lr", "untie_embeddings_and_output_weights"]
    below = lines[headline + 1 :]
    per_launch = below.index("Per-launch values (ports, run and job ids, pids, hosts, timestamps): 6")
    same_number = below.index("The same number in another type: 1")
    assert per_launch < same_number
    rows = [line.split()[0] for line in below[per_launch + 3 : same_number - 1]]
    assert rows == sorted(ACTOR_ENV)
    assert below[same_number + 3].split() == ["kl_coef", "type", "0.0", "(float)", "0", "(int)"]


def test_other_type_changes_stay_real() -> None:
    result = diff_configs({"n": "1", "flag": True, "x": 1.5}, {"n": 1, "flag": 1, "x": 1})
    assert result.numeric_type_only == []
    assert result.real == ["flag", "n", "x"]
    assert result.format_table().splitlines()[-1] == "3 difference(s) between a and b, 3 of them a type change"


def test_only_noise_says_so() -> None:
    result = diff_configs({"MASTER_PORT": 1, "k": 0.0}, {"MASTER_PORT": 2, "k": 0})
    table = result.format_table("actor", "critic")
    assert table.splitlines()[0] == (
        "0 difference(s) between actor and critic (not counted, listed below: "
        "1 per-launch value(s), 1 numeric type-only change(s))"
    )
