"""W&B through the slime drop-ins, as slime users meet it: slime's run names, and ``wandb.log``.

Args come from the stand-in of slime's parser (tests/slime/stand_in) with the adapter's options;
W&B runs offline and is read back with W&B's own reader (``wandb leet inspect``).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tracking_jsonl.reader import read_run

from slime_integration import current_run, options, tracking, wandb_bridge
from tracking_core.handle import RUN_ENV

wandb = pytest.importorskip("wandb")

STAND_IN = Path(__file__).resolve().parent / "stand_in"
ISOLATED_ENV = (
    RUN_ENV,
    "TRACKING_CORE_BACKENDS",
    "TRACKING_CORE_DIR",
    "TRACKING_CORE_WRITER",
    "WANDB_API_KEY",
    "WANDB_MODE",
    "WANDB_DIR",
    "WANDB_SERVICE",
    "WANDB_RUN_GROUP",
    "WANDB_NAME",
)
SUFFIX = r"[a-z0-9]{8}"  # slime's wandb.util.generate_id()


@pytest.fixture
def arguments(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    for name in ISOLATED_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.syspath_prepend(str(STAND_IN))
    saved = {n: m for n, m in sys.modules.items() if n.split(".")[0] in ("slime", "train")}
    for name in saved:
        del sys.modules[name]
    try:
        from slime.utils import arguments as module

        yield module
    finally:
        tracking.reset()
        tracking.unregister_plugins()
        for name in [n for n in sys.modules if n.split(".")[0] in ("slime", "train")]:
            del sys.modules[name]
        sys.modules.update(saved)


def parse(arguments: ModuleType, tmp: Path, *argv: str) -> argparse.Namespace:
    return arguments.parse_args(
        add_custom_arguments=options.add_tracking_arguments,
        argv=["--use-wandb", "--wandb-mode", "offline", "--tracking-dir", str(tmp), *argv],
    )


def read_wandb(run: Any) -> list[Any]:
    from tests.helpers.wandb_offline import read_job

    entry = run.handle.backends["wandb"]
    runs = read_job(Path(entry["dir"]) / "wandb", entry["id"])
    assert runs, "no W&B offline run directory for the job"
    return runs


def run_record(offline_run: Any) -> dict[str, Any]:
    (record,) = [r["run"] for r in offline_run.records if r.get("type") == "run"]
    return record


# -- 14: slime's run name ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "group", "name"),
    [
        (["--wandb-group", "qwen3-ppo"], rf"qwen3-ppo_{SUFFIX}", rf"qwen3-ppo_{SUFFIX}-RANK_0"),
        (["--wandb-group", "qwen3-ppo", "--disable-wandb-random-suffix"], "qwen3-ppo", "qwen3-ppo"),
        (["--wandb-group", "g", "--wandb-exp-name", "my-exp"], rf"g_{SUFFIX}", "my-exp"),
        (["--wandb-exp-name", "my-exp"], None, "my-exp"),
        ([], None, None),
    ],
)
def test_wandb_naming_follows_slime(
    arguments: ModuleType, tmp_path: Path, argv: list[str], group: str | None, name: str | None
) -> None:
    naming = tracking.wandb_naming(parse(arguments, tmp_path, *argv))
    if group is None:
        assert "wandb_group" not in naming
    else:
        assert re.fullmatch(group, naming["wandb_group"]), naming
        assert naming["wandb_random_suffix"] is False  # drawn once, here
    if name is None:
        assert naming == {}
    else:
        assert re.fullmatch(name, naming["wandb_name"]), naming
    if "wandb_group" in naming and naming["wandb_name"] != "my-exp":
        # the run name carries the group's own suffix, as slime's does
        assert naming["wandb_name"].startswith(naming["wandb_group"])


def test_the_drivers_rank_names_the_run(arguments: ModuleType, tmp_path: Path) -> None:
    args = parse(arguments, tmp_path, "--wandb-group", "g")
    args.rank = 3  # slime sets args.rank (0 in the driver); the name carries it
    assert tracking.wandb_naming(args)["wandb_name"].endswith("-RANK_3")


@pytest.mark.integration
@pytest.mark.parametrize("suffix", [True, False])
def test_the_wandb_run_has_slimes_name_and_group(
    arguments: ModuleType, tmp_path: Path, suffix: bool
) -> None:
    argv = ["--wandb-group", "qwen3-ppo"] + ([] if suffix else ["--disable-wandb-random-suffix"])
    args = parse(arguments, tmp_path, *argv)
    run = tracking.init_tracking(args)
    assert run is not None
    tracking.log(args, {"rollout/raw_reward": 1.0, "rollout/step": 0}, "rollout/step")
    assert run.flush(timeout=120)
    tracking.finish_tracking(args)
    (offline,) = read_wandb(run)
    record = run_record(offline)
    if suffix:
        assert re.fullmatch(rf"qwen3-ppo_{SUFFIX}", record["run_group"]), record
        assert record["display_name"] == f"{record['run_group']}-RANK_0"
    else:
        assert (record["run_group"], record["display_name"]) == ("qwen3-ppo", "qwen3-ppo")
    assert record["run_id"] == run.handle.backends["wandb"]["id"]


# -- 17: wandb.log beside the drop-ins -------------------------------------------------------------
@pytest.mark.integration
def test_a_direct_wandb_log_is_forwarded_with_one_warning(
    arguments: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """slime's rollout-buffer example calls ``wandb.log(log_dict)`` in the rollout process: with
    W&B's client in the delivery process there is no ``wandb.run`` here, and the values would be
    lost. They reach W&B (and the other selected trackers), on slime's step axis."""
    args = parse(arguments, tmp_path, "--tracking-backends", "wandb,jsonl")
    primary = tracking.init_tracking(args)
    rollout_args = argparse.Namespace(**vars(args))  # slime pickles args into the rollout actor
    rollout = tracking.init_tracking(rollout_args, primary=False)
    assert primary is not None and rollout is not None
    assert wandb.run is None  # the point: nothing in this process would take wandb.log
    assert current_run() is rollout  # the process's run (the newest, when there are several)
    with caplog.at_level(logging.WARNING, logger="tracking_core.slime"):
        for step in range(3):
            wandb.log({"rollout/no_filter/avg_reward": 0.5 + step, "rollout/step": step})
        wandb.log({"debug/payload_length": 7.0}, step=5)  # no slime axis: W&B's step=
        current_run().log_metrics({"rollout/explicit": 2.0}, step=1, step_key="rollout/step")
    forwarded = [r for r in caplog.records if "wandb.log() was called" in r.getMessage()]
    assert len(forwarded) == 1
    message = forwarded[0].getMessage()
    assert "forwarded to tracking-core run" in message
    assert "slime_integration.current_run().log_metrics" in message
    assert rollout.flush(timeout=120) and primary.flush(timeout=120)
    tracking.finish_tracking(rollout_args)
    tracking.finish_tracking(args)

    history = [row for r in read_wandb(primary) for row in r.history]
    got = sorted(
        (row["rollout/step"], row["rollout/no_filter/avg_reward"])
        for row in history
        if "rollout/no_filter/avg_reward" in row
    )
    assert got == [(0, 0.5), (1, 1.5), (2, 2.5)]
    assert [row["rollout/explicit"] for row in history if "rollout/explicit" in row] == [2]
    assert [row["debug/payload_length"] for row in history if "debug/payload_length" in row] == [7]

    jsonl = read_run(Path(primary.handle.backends["jsonl"]["dir"]))
    points = sorted((m["name"], m["step"], m["step_key"], m["value"]) for m in jsonl.metrics)
    assert points == [
        ("debug/payload_length", 5, None, 7.0),
        ("rollout/explicit", 1, "rollout/step", 2.0),
        *[("rollout/no_filter/avg_reward", s, "rollout/step", 0.5 + s) for s in range(3)],
    ]


def test_wandb_log_is_left_alone_where_wandb_is_not_selected_or_has_a_run(
    arguments: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = wandb.log
    args = parse(arguments, tmp_path, "--tracking-backends", "jsonl")
    assert tracking.init_tracking(args) is not None
    assert wandb.log is own  # W&B not selected: W&B's own function, which raises as before
    with pytest.raises(wandb.Error, match=r"wandb.init\(\)"):
        wandb.log({"x": 1.0})
    tracking.reset()

    args = parse(arguments, tmp_path)
    run = tracking.init_tracking(args)
    assert run is not None and wandb.log is not own
    assert getattr(wandb.log, wandb_bridge.ORIGINAL_ATTR) is own
    with monkeypatch.context() as mp:
        mp.setattr(wandb, "run", object())  # as if the user ran wandb.init in this process
        with pytest.raises(wandb.Error, match=r"wandb.init\(\)"):
            wandb.log({"x": 1.0}, 3)  # W&B's own function ran, nothing was forwarded
    tracking.reset()
    assert wandb.log is own  # put back
    assert tracking.current_run() is None
