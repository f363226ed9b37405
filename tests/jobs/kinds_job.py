"""A finished run of every kind of record, for ``tracking-core show``'s tests: argparse args with
the tracking options (most left unset) as the launch and the actor's config, metrics, two
tables, two histograms, a text and an artifact of the actor. Prints the run directory.

Usage: python kinds_job.py TRACKING_DIR BACKENDS
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import tracking_core
from tracking_core.options import add_tracking_options


def job_args(backends: str) -> argparse.Namespace:
    """The job's args: its own options and every tracking option, only the backends set."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--rollout-batch-size", type=int, default=8)
    add_tracking_options(parser)
    return parser.parse_args(["--tracking-backends", backends, "--lr", "0.002"])


def main(tracking_dir: str, backends: str) -> None:
    args = job_args(backends)
    run = tracking_core.start_run(args=args, tracking_dir=tracking_dir, name="kinds")
    actor = tracking_core.attach(role="actor", config=args, collect=False)
    artifact = Path(tracking_dir) / "ckpt.txt"
    artifact.write_text("weights\n")
    for step in range(2):
        actor.log_metrics({"train/loss": 1.0 / (step + 1)}, step=step, step_key="train/step")
        actor.log_table("rollout/samples", [{"prompt": "p", "reward": 0.5 * step}], step=step)
        actor.log_histogram("rollout/reward", [0.1, 0.2, 0.3 * step], step=step)
    actor.log_text("notes", "first try", step=0)
    actor.log_artifact(artifact, name="ckpt")
    actor.finish(timeout=240)
    summary = run.finish(timeout=240)
    assert summary.status.value == "FINISHED", summary.describe()
    print(run.handle.run_dir)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
