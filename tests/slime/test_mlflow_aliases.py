"""The other flags of slime's MLflow pull requests (THUDM/slime#2099: samples per step and cell
length of the samples tables, rollout's and eval's; #1591: a run id to resume), accepted as
aliases of the adapter's own options on the stand-in's parser (tests/slime/stand_in), defined
here or by slime, and shown to take effect: the rows and cells the jsonl tracker delivered, and
the MLflow run a second job resumes on a real ``mlflow server``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tracking_jsonl.reader import find_run

from slime_integration import install as installer
from slime_integration import options, samples, tracking
from tests.slime import test_options
from tests.slime.test_samples import make_samples

ALIASES = {
    "--mlflow-log-samples-per-step": ("mlflow_log_samples_per_step", "2"),
    "--mlflow-eval-log-samples-per-step": ("mlflow_eval_log_samples_per_step", "1"),
    "--mlflow-log-max-chars": ("mlflow_log_max_chars", "12"),
    "--mlflow-eval-log-max-chars": ("mlflow_eval_log_max_chars", "6"),
    "--mlflow-run-id": ("mlflow_run_id", "0123abcd"),
}
ALIAS_ARGV = [item for flag, (_, value) in ALIASES.items() for item in (flag, value)]

#: The stand-in's ``slime.utils.arguments``, nothing of it (or of the adapter) left behind.
arguments = test_options.arguments


def _parsed(ns: argparse.Namespace) -> dict[str, object]:
    return {dest: getattr(ns, dest) for dest, _ in ALIASES.values()}


EXPECTED = {"mlflow_log_samples_per_step": 2, "mlflow_eval_log_samples_per_step": 1,
            "mlflow_log_max_chars": 12, "mlflow_eval_log_max_chars": 6, "mlflow_run_id": "0123abcd"}  # fmt: skip


def test_the_aliases_parse_on_todays_slime(arguments: ModuleType) -> None:
    parser = arguments.build_parser(options.add_tracking_arguments)
    ns = parser.parse_args(ALIAS_ARGV)
    assert _parsed(ns) == EXPECTED
    assert (samples.wanted(ns), samples.wanted_eval(ns)) == (2, 1)
    assert (samples.max_chars(ns), samples.max_chars(ns, for_eval=True)) == (12, 6)
    assert options.resume_ids(ns) == [("mlflow", "0123abcd")]
    # unset, they change nothing: sample logging stays off, cells whole, nothing resumed
    plain = parser.parse_args([])
    assert (samples.wanted(plain), samples.wanted_eval(plain), samples.max_chars(plain)) == (0, 0, 0)
    assert options.resume_ids(plain) == []
    # the adapter's own options win where both are given
    both = parser.parse_args([*ALIAS_ARGV, "--tracking-log-samples", "4", "--tracking-log-samples-max-chars", "30"])
    assert (samples.wanted(both), samples.max_chars(both)) == (4, 30)
    assert (samples.wanted_eval(both), samples.max_chars(both, for_eval=True)) == (1, 6)


@pytest.mark.parametrize("how", ["add_custom_arguments", "install"])
def test_a_slime_that_defines_them_is_used_without_a_clash(
    arguments: ModuleType, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """slime adding the flags after add_custom_arguments (the adapter's yield), or the adapter
    adding its options to slime's complete parser (install()): no argparse error, one definition
    each, slime's, and the values are read from args all the same, slime's defaults included."""
    monkeypatch.setattr(arguments, "PROPOSED_MLFLOW_FLAGS", True)
    if how == "install":
        installer.install()
        parser = arguments.build_parser()
    else:
        parser = arguments.build_parser(options.add_tracking_arguments)
    for flag in ALIASES:
        (action,) = [a for a in parser._actions if flag in a.option_strings]
        assert action.help == "slime's" and not getattr(action, options.YIELDS_ATTR, False), flag
    ns = parser.parse_args(ALIAS_ARGV)
    assert _parsed(ns) == EXPECTED and samples.wanted(ns) == 2
    assert options.resume_ids(ns) == [("mlflow", "0123abcd")]
    # slime's own default (5 samples per step in #2099) applies, as it would in slime
    assert samples.wanted(parser.parse_args([])) == 5


def _tables(tmp: Path) -> dict[str, list[dict[str, object]]]:
    run = find_run(next((tmp / "jsonl").iterdir()).name, str(tmp))
    out: dict[str, list[dict[str, object]]] = {}
    for file in sorted(run.glob("*.jsonl")):
        for line in map(json.loads, file.read_text().splitlines()):
            if line.get("type") == "table":
                out[line["name"]] = [dict(zip(line["columns"], row, strict=True)) for row in line["rows"]]
    return out


def test_samples_per_step_and_max_chars_shape_the_tables_delivered(arguments: ModuleType, tmp_path: Path) -> None:
    argv = [
        "--tracking-backends", "jsonl", "--tracking-dir", str(tmp_path),
        "--mlflow-log-samples-per-step", "3", "--mlflow-log-max-chars", "10",
        "--mlflow-eval-log-samples-per-step", "2", "--mlflow-eval-log-max-chars", "5",
        "--custom-rollout-log-function-path", "slime_integration.samples.log_rollout_samples",
        "--custom-eval-rollout-log-function-path", "slime_integration.samples.log_eval_rollout_samples",
    ]  # fmt: skip
    parser = arguments.build_parser(options.add_tracking_arguments)
    parser.add_argument("--custom-rollout-log-function-path")  # slime's own, outside the stand-in's parser
    parser.add_argument("--custom-eval-rollout-log-function-path")
    args = parser.parse_args(argv)
    for key, value in {"reward_key": None, "wandb_always_use_train_step": False}.items():
        setattr(args, key, value)
    from slime.observability import rollout_metrics

    tracking.init_tracking(args)
    rollout_metrics.log_rollout_data(1, args, make_samples(8), {}, 1.0)
    rollout_metrics.log_eval_rollout_data(1, args, {"gsm8k": {"rewards": [1, 0, 1], "samples": make_samples(3)}})
    tracking.finish_tracking(args)

    tables = _tables(tmp_path)
    rollout, evaluated = tables["rollout/samples"], tables["eval/gsm8k/samples"]
    assert [r["index"] for r in rollout] == [0, 4, 7]  # 3 rows of 8, spread over the batch
    assert (rollout[0]["prompt"], rollout[0]["response"]) == ("question 0", "answer ")  # short: whole
    assert rollout[2]["response"] == "answer an\u2026"  # 56 characters cut to 10, the last an ellipsis
    assert len(evaluated) == 2
    assert {r["prompt"] for r in evaluated} == {"ques\u2026"}
    assert evaluated[1]["response"] == "answ\u2026"


@pytest.mark.integration
def test_mlflow_run_id_resumes_the_named_mlflow_run(
    arguments: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlflow_server: object
) -> None:
    """A second job given the first job's MLflow run id (as slime's --mlflow-run-id) logs into
    that MLflow run, steps continuing; the experiment still has one run."""
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    monkeypatch.setenv("TRACKING_CORE_DELIVERY", "thread")  # one process imports mlflow once
    uri = mlflow_server.uri  # type: ignore[attr-defined]
    experiment = f"resume-{tmp_path.name}"
    base = ["--use-mlflow", "--mlflow-tracking-uri", uri, "--mlflow-experiment-name", experiment,
            "--tracking-dir", str(tmp_path)]  # fmt: skip

    def job(argv: list[str], step: int) -> Any:
        args = arguments.parse_args(add_custom_arguments=options.add_tracking_arguments, argv=argv)
        run = tracking.init_tracking(args)
        assert run is not None
        tracking.log(args, {"rollout/raw_reward": 0.5 + step, "rollout/step": step}, "rollout/step")
        tracking.finish_tracking(args)
        tracking.reset()
        return run

    first = job(base, 0)
    mlflow_id = first.handle.backends["mlflow"]["run_id"]
    second = job([*base, "--mlflow-run-id", mlflow_id], 1)
    assert second.handle.run_id == first.handle.run_id
    assert second.handle.backends["mlflow"]["run_id"] == mlflow_id

    client = MlflowClient(uri)
    found = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert [r.info.run_id for r in found] == [mlflow_id]
    history = client.get_metric_history(mlflow_id, "rollout/raw_reward")
    assert sorted((m.step, m.value) for m in history) == [(0, 0.5), (1, 1.5)]
    assert client.get_run(mlflow_id).info.status == "FINISHED"
