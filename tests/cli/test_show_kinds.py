"""``tracking-core show`` lists every kind of record each tracker of a run holds (tables,
histograms, texts, artifacts), read back with the tracker's own reader; the config text
(TensorBoard's, ``show``'s) leaves out the tracking options that were not set."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.subprocess_python import JOBS, python_env
from tests.jobs.kinds_job import job_args
from tracking_core.handle import RunHandle
from tracking_core.options import tracking_option_dests

BACKENDS = "jsonl,tensorboard,mlflow,wandb,trackio"
JOB = JOBS / "kinds_job.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunHandle:
    tracking_dir = tmp_path_factory.mktemp("kinds")
    done = subprocess.run(
        [sys.executable, str(JOB), str(tracking_dir), BACKENDS],
        capture_output=True, text=True, timeout=600, cwd=tracking_dir, check=False,
        env=python_env({"WANDB_SILENT": "true"}, drop=("TRACKING_CORE_*", "MLFLOW_*", "WANDB_*", "TENSORBOARD_DIR")),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return RunHandle.parse(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def shown(run: RunHandle) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "show", str(run.run_dir), "--limit", "500"],
        capture_output=True, text=True, timeout=300, check=False,
        env=python_env(drop=("TRACKING_CORE_*", "MLFLOW_*")),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _kinds(section: str) -> list[str]:
    """The lines of a tracker's section from its first kind line on (after its series)."""
    lines = section.splitlines()
    first = next(i for i, line in enumerate(lines) if re.match(r"  (artifacts|histograms|tables|texts): ", line))
    return lines[first:]


def _section(out: str, tracker: str) -> str:
    return out.split(f"\n[{tracker}] ", 1)[1].split("\n\n", 1)[0]


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(900)
def test_show_lists_every_kind_each_tracker_holds(shown: str) -> None:
    rich = [
        "  artifacts: 1 in 1 name(s)", "    actor/ckpt (1)",
        "  histograms: 2 in 1 name(s)", "    actor/rollout/reward (2)",
        "  tables: 2 in 1 name(s)", "    actor/rollout/samples (2)",
        "  texts: 1 in 1 name(s)", "    actor/notes (1)",
    ]  # fmt: skip
    assert _kinds(_section(shown, "jsonl")) == rich
    assert _kinds(_section(shown, "mlflow")) == rich
    # TensorBoard: tables, texts, artifact notes and the config are texts, a run per role
    assert _kinds(_section(shown, "tensorboard")) == [
        "  histograms: 2 in 1 name(s)", "    actor: rollout/reward (2)",
        "  texts: 6 in 5 name(s)",
        "    actor: artifacts/ckpt (1)", "    actor: config/actor (1)", "    actor: notes (1)",
        "    actor: rollout/samples (2)", "    launch: config/launch (1)",
    ]  # fmt: skip
    # trackio: its own value types; an artifact is a note (a text) there
    assert _kinds(_section(shown, "trackio")) == [
        "  histograms: 2 in 1 name(s)", "    actor/rollout/reward (2)",
        "  tables: 2 in 1 name(s)", "    actor/rollout/samples (2)",
        "  texts: 2 in 2 name(s)", "    actor/ckpt (1)", "    actor/notes (1)",
    ]  # fmt: skip
    # W&B offline: its summary holds the last of each (W&B keeps artifacts apart)
    assert _kinds(_section(shown, "wandb")) == [
        "  histograms: 1 in 1 name(s)", "    actor/rollout/reward (1)",
        "  tables: 1 in 1 name(s)", "    actor/rollout/samples (1)",
        "  texts: 1 in 1 name(s)", "    actor/notes (1)",
    ]  # fmt: skip


def _set_keys() -> list[str]:
    """The job's keys without its tracking options left unset (null)."""
    tracking = tracking_option_dests()
    args = vars(job_args(BACKENDS))
    assert sum(1 for k, v in args.items() if v is None and k in tracking) >= 10  # what is left out
    return sorted(k for k, v in args.items() if not (v is None and k in tracking))


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(900)
def test_config_text_leaves_out_unset_tracking_options(run: RunHandle, shown: str) -> None:
    keys = _set_keys()
    hidden = len(vars(job_args(BACKENDS))) - len(keys)
    # show: each namespace's block holds exactly the keys that were set
    configs = shown[shown.index("\nconfigs, per namespace"):].splitlines()[1:]
    for namespace in ("actor", "launch"):
        start = configs.index(f"  [{namespace}] {len(keys)} keys ({hidden} unset tracking options not shown)")
        block = [line for line in configs[start + 1 : start + 1 + len(keys) + 1] if line.startswith("    ")]
        assert [line.split(" = ")[0].strip() for line in block] == keys, block
    # TensorBoard's config text of the actor, read back with TensorBoard's reader
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator

    acc = EventAccumulator(str(Path(run.backends["tensorboard"]["logdir"]) / "actor"), size_guidance={"tensors": 0})
    acc.Reload()
    (event,) = acc.Tensors("config/actor")
    text = event.tensor_proto.string_val[0].decode()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert [re.match(r"\| `actor/([^`]*)`", row).group(1) for row in rows] == keys, text  # type: ignore[union-attr]
    assert not any(row.endswith("| `null` |") for row in rows), text
    assert text.splitlines()[2].startswith(
        f"{len(keys)} keys, prefix `actor/`, {len([k for k in keys if k not in tracking_option_dests()])} "
        "logged as parameters; "
        f"{hidden} unset tracking options not shown; "
    ), text
