"""Rollout samples as tables (``--tracking-log-samples N``), both ways in: slime's own
``--custom-rollout-log-function-path`` without patching, and ``install()``, which wraps slime's
``log_rollout_data`` / ``log_eval_rollout_data`` so that a user's own custom function keeps
working (slime calls it first). Real ``Sample``-shaped objects (the stand-in's copy of slime's
dataclass), read back from the jsonl tracker."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from tracking_jsonl.reader import find_run

from slime_integration import install as installer
from slime_integration import samples, tracking
from tests.slime.test_install import slime_args, stand_in  # noqa: F401 - the fixture

CUSTOM = '''
CALLS = []


def log(rollout_id, args, samples, extra, rollout_time):
    CALLS.append(("rollout", rollout_id, len(samples)))
    return True  # "handled": slime's default metrics are skipped


def log_eval(rollout_id, args, data, extra):
    CALLS.append(("eval", rollout_id, sorted(data)))
    return False
'''


def make_samples(count: int = 8) -> list:
    from slime.utils.types import Sample

    return [
        Sample(
            index=i,
            group_index=i // 2,
            prompt=f"question {i}",
            response="answer " * (i + 1),
            response_length=2 * (i + 1),
            label=str(i % 3),
            reward=float(i) / 2,
            status=Sample.Status.TRUNCATED if i == 7 else Sample.Status.COMPLETED,
        )
        for i in range(count)
    ]


def args_for(tmp: Path, n: int, **extra: object) -> argparse.Namespace:
    args = slime_args(tmp)
    for key, value in {
        "tracking_log_samples": n, "reward_key": None, "custom_rollout_log_function_path": None,
        "custom_eval_rollout_log_function_path": None, "wandb_always_use_train_step": False, **extra,
    }.items():  # fmt: skip
        setattr(args, key, value)
    return args


def lines(tmp: Path, kind: str) -> list[dict]:
    import json

    run = find_run(next((tmp / "jsonl").iterdir()).name, str(tmp))
    out = []
    for file in sorted(run.glob("*.jsonl")):
        out += [o for o in map(json.loads, file.read_text().splitlines()) if o.get("type") == kind]
    return out


def test_samples_through_slimes_own_custom_log_function(stand_in: Path, tmp_path: Path) -> None:  # noqa: F811
    from slime.observability import logging_utils, rollout_metrics

    args = args_for(
        tmp_path, 3,
        custom_rollout_log_function_path="slime_integration.samples.log_rollout_samples",
        custom_eval_rollout_log_function_path="slime_integration.samples.log_eval_rollout_samples",
    )  # fmt: skip
    tracking.init_tracking(args)
    rollout_metrics.log_rollout_data(2, args, make_samples(), {}, 1.5)
    rollout_metrics.log_eval_rollout_data(2, args, {"gsm8k": {"rewards": [1, 0, 1], "samples": make_samples(3)}})
    tracking.finish_tracking(args)

    (table,) = [t for t in lines(tmp_path, "table") if t["name"] == "rollout/samples"]
    assert (table["step"], table["step_key"]) == (2, "rollout/step")
    assert table["columns"] == list(samples.COLUMNS)
    rows = [dict(zip(table["columns"], r, strict=True)) for r in table["rows"]]
    assert [r["index"] for r in rows] == [0, 4, 7]  # spread over the batch
    assert rows[2] == {
        "index": 7, "group": 3, "prompt": "question 7", "response": "answer " * 8, "label": "1",
        "reward": 3.5, "response_length": 16, "status": "truncated", "truncated": True,
    }  # fmt: skip
    hists = {h["name"]: h for h in lines(tmp_path, "histogram")}
    assert hists["rollout/reward"]["count"] == 8 and hists["rollout/reward"]["max"] == 3.5
    assert hists["rollout/response_len"]["min"] == 2 and hists["rollout/response_len"]["step_key"] == "rollout/step"
    (eval_table,) = [t for t in lines(tmp_path, "table") if t["name"] == "eval/gsm8k/samples"]
    assert eval_table["step_key"] == "eval/step" and len(eval_table["rows"]) == 3
    assert hists["eval/gsm8k/reward"]["count"] == 3
    # slime's own metrics went on (the functions return False): here to the stand-in's recorder.
    assert [c[0] for c in logging_utils.ORIGINAL_CALLS if c[0] == "log"] == ["log", "log"]


def test_install_logs_samples_and_a_users_custom_function_keeps_working(stand_in: Path, tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "my_rollout_log.py").write_text(CUSTOM)
    sys.path.insert(0, str(tmp_path))
    try:
        installer.install()
        import my_rollout_log
        from slime.observability.rollout_metrics import log_eval_rollout_data, log_rollout_data

        args = args_for(
            tmp_path, 2,
            custom_rollout_log_function_path="my_rollout_log.log",
            custom_eval_rollout_log_function_path="my_rollout_log.log_eval",
        )  # fmt: skip
        tracking.init_tracking(args)
        for rollout_id in range(3):
            log_rollout_data(rollout_id, args, make_samples(), {}, 1.0)
        log_eval_rollout_data(3, args, {"math": {"rewards": [1.0, 0.0], "samples": make_samples(2)}})
        tracking.finish_tracking(args)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_rollout_log", None)
    assert my_rollout_log.CALLS == [("rollout", 0, 8), ("rollout", 1, 8), ("rollout", 2, 8), ("eval", 3, ["math"])]
    tables = lines(tmp_path, "table")
    assert [(t["name"], t["step"], len(t["rows"])) for t in tables] == [
        ("rollout/samples", 0, 2), ("rollout/samples", 1, 2), ("rollout/samples", 2, 2), ("eval/math/samples", 3, 2),
    ]  # fmt: skip
    # slime's default rollout metrics were skipped (the user's function said so); eval's ran.
    metrics = {m["name"] for m in lines(tmp_path, "metric")}
    assert "eval/math" in metrics and "rollout/response_len/mean" not in metrics


def test_off_by_default_and_never_a_fault(stand_in: Path, tmp_path: Path) -> None:  # noqa: F811
    installer.install()
    from slime.observability.rollout_metrics import log_rollout_data

    args = args_for(tmp_path, 0)
    tracking.init_tracking(args)
    log_rollout_data(0, args, make_samples(), {}, 1.0)
    args.tracking_log_samples = 4
    odd = [SimpleNamespace(effective_response_length=3), SimpleNamespace(effective_response_length=5)]
    log_rollout_data(1, args, odd, {}, 1.0)  # not Sample-shaped: no fault
    tracking.finish_tracking(args)
    tables = lines(tmp_path, "table")
    assert [t["step"] for t in tables] == [1]  # nothing at rollout 0 (off)
    assert [r[4] for r in tables[0]["rows"]] == [None, None]  # no label, no crash


@pytest.mark.parametrize(("count", "n", "want"), [(8, 3, [0, 4, 7]), (2, 5, [0, 1]), (10, 1, [0]), (0, 3, [])])
def test_spread(count: int, n: int, want: list[int]) -> None:
    assert samples.spread(count, n) == want


def test_slimes_parser_takes_the_option(stand_in: Path) -> None:  # noqa: F811
    installer.install()
    from slime.utils import arguments

    assert arguments.parse_args(argv=["--tracking-log-samples", "16"]).tracking_log_samples == 16
    assert arguments.parse_args(argv=[]).tracking_log_samples == 0
