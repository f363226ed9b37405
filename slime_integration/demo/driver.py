"""The demo's driver: the primary of the run, launching the actor and critic groups.

``tracking-core demo`` opens the run (the embedded MLflow store by default), resolves each role's
effective args from ``--megatron-config-path`` as slime does, starts the actor and the critic as
two gloo worlds with torch's elastic launcher (``torchrun``), forwards their progress, and ends by
printing where the data went and how actor and critic differ in config.
"""

from __future__ import annotations

import argparse
import logging
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import tracking_core
from tracking_core.host_api import settings, tracking_dir

DEFAULT_ROLES = Path(__file__).with_name("roles.yaml")

#: The launch config of the demo job: a slime-like namespace of PPO settings.
HYPERPARAMETERS: dict[str, Any] = {
    "seed": 1234,
    "lr": 3e-3,
    "hidden_size": 32,
    "rollout_batch_size": 256,
    "ppo_epochs": 4,
    "value_epochs": 4,
    "eps_clip": 0.2,
    "entropy_coef": 0.01,
    "kl_coef": 0.0,
    "advantage_estimator": "ppo",
    "tensor_model_parallel_size": 1,
    "pipeline_model_parallel_size": 1,
    "use_opd": False,
    "custom_advantage_function_path": None,
    "untie_embeddings_and_output_weights": False,
    "disable_param_buffers_cpu_backup": True,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracking-core demo",
        description="A slime-shaped PPO job on CPU: a driver, an actor group and a critic group.",
    )
    add_demo_arguments(parser)
    return parser


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, default=20, help="PPO iterations (default 20)")
    parser.add_argument("--actor-ranks", type=int, default=2, help="ranks in the actor world")
    parser.add_argument("--critic-ranks", type=int, default=2, help="ranks in the critic world")
    parser.add_argument(
        "--megatron-config-path",
        default=str(DEFAULT_ROLES),
        help="slime's per-role overrides YAML (default: the demo's own)",
    )
    parser.add_argument(
        "--out", default=None, help="the tracking directory (default: --tracking-dir or ./tracking-runs)"
    )
    for key, value in HYPERPARAMETERS.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            parser.add_argument(flag, type=_bool, default=value, metavar="BOOL")
        elif value is None:
            parser.add_argument(flag, default=None)
        else:
            parser.add_argument(flag, type=type(value), default=value)
    tracking_core.add_tracking_options(parser)


def _bool(text: str) -> bool:
    return text.lower() in {"1", "true", "yes", "on"}


def _launch(role: str, ranks: int, exchange: Path, steps: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [
        sys.executable, "-m", "torch.distributed.run",
        "--standalone", f"--nproc-per-node={ranks}",
        "--module", "slime_integration.demo.worker",
        "--role", role,
        "--exchange", str(exchange),
        "--role-args", str(exchange / "role_args.pkl"),
        "--steps", str(steps),
    ]  # fmt: skip
    return subprocess.Popen(cmd, env=env)


def where_to_look(handle: tracking_core.RunHandle) -> list[str]:
    """One line per backend: where its data is and the command that opens it, runnable as
    printed from any directory (tools outside ``PATH`` by their full path)."""
    from tracking_core.host_api import where_to_look as tracker_lines
    from tracking_core.plugin_api import runnable

    lines = tracker_lines(handle)
    if {"mlflow", "tensorboard"} & set(handle.backends):
        lines.insert(
            0,
            f"open it: {runnable('tracking-core')} ui {handle.run_dir}   "
            "(starts the MLflow UI / TensorBoard on this run and prints their URLs)",
        )
    lines.append(f"summary: {runnable('tracking-core')} show {handle.run_dir}")
    return lines


def run_name(args: argparse.Namespace) -> str:
    """The demo run's name: ``--tracking-run-name`` when given, else ``ppo-demo-`` and the
    local start time to the second, so that each demo run reads apart in a tracker's run list."""
    return getattr(args, "tracking_run_name", None) or time.strftime("ppo-demo-%Y%m%d-%H%M%S")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_demo(args)


def run_demo(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("tracking_core").setLevel(logging.INFO)
    from slime_integration.role_args import resolve_role_args

    out = Path(args.out or tracking_dir(args)).absolute()
    args.tracking_dir = str(out)
    if getattr(args, "tracking_system_metrics", None) is None and not settings.get(settings.SYSTEM_METRICS):
        args.tracking_system_metrics = "1"  # the demo shows the node's series: on unless said off
    started = time.monotonic()
    plumbing = {"out", "func", "command", "verbose"}  # CLI wiring, not the job's config
    launch = argparse.Namespace(**{k: v for k, v in vars(args).items() if k not in plumbing})
    run = tracking_core.start_run(config=launch, args=args, tracking_dir=out, name=run_name(args))
    roles = resolve_role_args(launch, args.megatron_config_path)
    exchange = run.handle.run_dir / "exchange"
    exchange.mkdir(parents=True, exist_ok=True)
    (exchange / "role_args.pkl").write_bytes(pickle.dumps(roles))
    print(
        f"demo: PPO on a contextual bandit, {args.steps} steps (0..{args.steps - 1}, the "
        f"step every tracker records); actor world of "
        f"{args.actor_ranks} ranks, critic world of {args.critic_ranks} ranks; "
        f"logging to {', '.join(run.backends)}",
        flush=True,
    )
    procs = {
        "actor": _launch("actor", args.actor_ranks, exchange, args.steps),
        "critic": _launch("critic", args.critic_ranks, exchange, args.steps),
    }
    failed = []
    try:
        while procs:
            for role, proc in list(procs.items()):
                code = proc.poll()
                if code is None:
                    continue
                del procs[role]
                if code != 0:
                    failed.append(role)
                    (exchange / "abort").write_text(f"the {role} group exited with {code}")
            time.sleep(0.2)
    except KeyboardInterrupt:
        for proc in procs.values():
            proc.terminate()
        run.finish(status="KILLED")
        return 130
    summary = run.finish(status="FAILED" if failed else "FINISHED")
    if not failed:  # the groups' plumbing (role args, rollouts): not the user's data
        shutil.rmtree(exchange, ignore_errors=True)
    outcome = f"FAILED ({', '.join(failed)})" if failed else "finished"
    # A tracker that lacks data makes the demo a failure to look at: said, and exit status 1.
    delivery = "" if summary.drained else "; delivery INCOMPLETE: the trackers lack data (see above)"
    print(f"\ndemo {outcome} in {time.monotonic() - started:.0f} s; run {summary.status.value}{delivery}")
    print("\nWhere the run is:")
    for line in where_to_look(run.handle):
        print(f"  {line}")
    print(f"  configs (JSON): {run.handle.run_dir / 'config'}")
    print(
        "  samples and rewards: the table actor/rollout/samples (context, action, reward) and "
        "the histogram actor/rollout/reward at every rollout/step, in each tracker above"
    )
    print(
        "  every rank counts: actor/rollout/reward_mean and optimal_rate reduced over the actor's "
        "ranks, actor/rollout/reward_all/p5..p95 over all their rewards; each phase's time as "
        "<role>/perf/<phase>/max, mean, min and slowest_rank, and each role's Perfetto trace "
        "(`show` names it)"
    )
    from tracking_core.host_api import system_metrics_interval

    interval = system_metrics_interval(args)
    if interval is not None:
        from tracking_core.host_api import host_key

        print(f"  this node's CPU, memory, disk, network and GPUs: system/{host_key()}/... every {interval:g} s")
    if not failed:
        from tracking_core.host_api import diff_command

        print("\nActor vs critic: effective config difference")
        diff_command(str(run.handle.run_dir), ["actor", "critic"], str(out))
    return 1 if failed or not summary.drained else 0


if __name__ == "__main__":
    sys.exit(main())
