"""The drop-ins in slime's own topology, under Ray.

As slime's ``train.py`` runs it: the driver (this process) calls ``init_tracking(args)``; a
rollout-manager actor runs slime's own rollout code (the stand-in's ``RolloutManager``, reached
by ``install()`` through the environment Ray workers inherit), which calls
``init_tracking(args, primary=False)``, logs ``rollout/*`` with ``rollout/step`` and calls
``finish_tracking`` when disposed of; an actor group and a critic group (Ray actors, each group its
own gloo world with Megatron's parallel state initialised: the actor tp=2, the critic pp=2) call
``init_tracking(args, primary=False, role=...)`` on every rank and ``log`` ``train/*`` with
``train/step``, and never call ``finish_tracking``; the driver calls ``finish_tracking``; then Ray
shuts down (SIGTERM to every actor). The job runs twice on the same actors, once per config key
style, and both runs are read back afterwards.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import socket
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tracking_jsonl.reader import read_run

from slime_integration import install as installer
from slime_integration import tracking
from slime_integration.fixture_args import load_fixture_namespaces
from slime_integration.role_args import resolve_role_args
from tracking_core.delivery.sync import sync
from tracking_core.handle import ARGS_ATTR, RUN_ENV, RunHandle
from tracking_core.options import tracking_option_dests

ray = pytest.importorskip("ray")
pytest.importorskip("megatron.core")

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STAND_IN = Path(__file__).resolve().parent / "stand_in"
STEPS = 3
#: (role, world size, tensor parallel, pipeline parallel, the rank that must write)
GROUPS = (("actor", 2, 2, 1, 0), ("critic", 2, 1, 2, 1))

ACTOR_METRICS = ("train/pg_loss", "train/pg_clipfrac", "train/grad_norm")
CRITIC_METRICS = ("train/critic-value_loss", "train/critic-grad_norm")
ROLLOUT_METRICS = ("rollout/raw_reward", "rollout/response_length")
#: Reduced over each role's data-parallel group (one rank) and its phase's series: the values of
#: the rank that counts (the actor's tensor-parallel rank 0, the critic's last pipeline stage).
REDUCED = {"train/samples": 8.0, "train/critic-samples": 16.0}
PHASES = tuple(f"perf/{role}_train/{s}" for role in ("actor", "critic") for s in ("max", "mean", "min", "slowest_rank"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MegatronRank:
    """One rank of a training group, as slime's MegatronTrainRayActor: its own gloo world,
    Megatron's parallel state, the tracking calls slime's actor and model code make."""

    def setup(self, rank: int, world: int, port: int, tp: int, pp: int) -> dict[str, Any]:
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
        )
        from megatron.core import parallel_state

        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp
        )
        self.rank = rank
        return {"pid": os.getpid(), "run_env": os.environ.get("TRACKING_CORE_RUN")}

    def start(self, args: argparse.Namespace, role: str) -> dict[str, Any]:
        from slime_integration.tracking import init_tracking

        self.args, self.role = args, role
        run = init_tracking(args, primary=False, role=role)
        return {"writer": bool(run is not None and run.is_writer), "rank": self.rank}

    def train_step(self, step: int) -> None:
        from slime_integration.tracking import log

        # slime's model.py: train/<key> for the actor, train/critic-<key> for the critic
        keys = ("pg_loss", "pg_clipfrac", "grad_norm") if self.role == "actor" else ("value_loss", "grad_norm")
        tag = "" if self.role == "actor" else f"{self.role}-"
        log_dict: dict[str, Any] = {f"train/{tag}{k}": 0.1 * (i + 1) + step for i, k in enumerate(keys)}
        log_dict["train/step"] = step
        log(self.args, log_dict, step_key="train/step")
        # every rank of the role: a phase timed and a value summed over Megatron's data-parallel
        # group (one rank here: tensor-parallel rank 1 and the first pipeline stage count nothing)
        import tracking_core as tc

        run = tracking.current_run(self.args)
        with run.timer(f"{self.role}_train", step=step, step_key="train/step"):
            time.sleep(0.01 * (self.rank + 1))
        run.log_metrics({f"train/{tag}samples": tc.Sum(8 * (self.rank + 1))}, step=step, step_key="train/step")
        if step == STEPS - 1:  # the last step's reduced values: published now, not at Ray's teardown
            run.flush(timeout=30)


class RolloutManagerActor:
    """slime's RolloutManager, from (stand-in) slime's own module: its tracking calls are slime's."""

    def __init__(self, args: argparse.Namespace) -> None:
        from slime.ray.rollout import RolloutManager

        self.manager = RolloutManager(args)

    def probe(self) -> dict[str, Any]:
        from slime.observability import logging_utils

        return {
            "pid": os.getpid(),
            "patched": logging_utils.init_tracking is tracking.init_tracking,
            "original_calls": logging_utils.ORIGINAL_CALLS,
            "run_env": os.environ.get("TRACKING_CORE_RUN"),
        }

    def generate(self, rollout_id: int) -> None:
        self.manager.log_rollout(
            rollout_id, {"rollout/raw_reward": 0.5 * rollout_id, "rollout/response_length": 100.0 + rollout_id}
        )

    def dispose(self) -> None:
        self.manager.dispose()


@pytest.fixture(scope="module")
def ray_job() -> Iterator[dict[str, Any]]:
    """Ray started as a slime driver would after install(): its workers inherit the variable and
    the bootstrap (and, for the test only, the stand-in slime on PYTHONPATH)."""
    with pytest.MonkeyPatch.context() as mp:
        for name in (RUN_ENV, "TRACKING_CORE_BACKENDS", "TRACKING_CORE_WRITER", "TRACKING_CORE_KEY_STYLE"):
            mp.delenv(name, raising=False)
        env = installer.child_environment({"PYTHONPATH": str(STAND_IN)})
        for key, value in env.items():
            mp.setenv(key, value)
        mp.setenv("OMP_NUM_THREADS", "1")
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            groups = {}
            for role, world, tp, pp, _ in GROUPS:
                port = _free_port()
                ranks = [ray.remote(num_cpus=0)(MegatronRank).remote() for _ in range(world)]
                infos = ray.get([r.setup.remote(i, world, port, tp, pp) for i, r in enumerate(ranks)])
                groups[role] = (ranks, infos)
            yield {"groups": groups, "shutdown": ray.shutdown}
        finally:
            if ray.is_initialized():
                ray.shutdown()
            ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def run_job(job: dict[str, Any], tmp: Path, key_style: str) -> tuple[RunHandle, dict[str, Any]]:
    """One slime job: driver, rollout manager, actor and critic groups."""
    base = load_fixture_namespaces(FIXTURES / "slime_ppo_args.json", ("base",))["base"]
    base.megatron_config_path = str(FIXTURES / "slime_megatron_roles.yaml")
    base.tracking_backends, base.tracking_dir, base.tracking_key_style = "jsonl", str(tmp), key_style
    tracking.init_tracking(base)  # the driver
    handle = RunHandle.parse(getattr(base, ARGS_ATTR))
    os.environ.pop(RUN_ENV, None)  # workers must find the run on args, as slime's do
    rollout = ray.remote(num_cpus=0)(RolloutManagerActor).remote(copy.deepcopy(base))
    role_args = resolve_role_args(base, base.megatron_config_path)  # slime's create_training_models
    starts = {
        role: ray.get([r.start.remote(role_args[role], role) for r in job["groups"][role][0]])
        for role, *_ in GROUPS
    }
    for step in range(STEPS):
        ray.get(
            [rollout.generate.remote(step)]
            + [r.train_step.remote(step) for role, *_ in GROUPS for r in job["groups"][role][0]]
        )
    probe = ray.get(rollout.probe.remote())
    ray.get(rollout.dispose.remote())  # finish_tracking in a secondary
    tracking.finish_tracking(base)  # the driver
    return handle, {"starts": starts, "probe": probe}


def wait_until_gone(pids: list[int], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)


def attaches(handle: RunHandle) -> Counter[str]:
    """How many processes attached as each role (the jsonl backend records each attach)."""
    out: Counter[str] = Counter()
    for file in Path(handle.backends["jsonl"]["dir"]).glob("*.jsonl"):
        for line in file.read_text().splitlines():
            record = json.loads(line)
            # `tracking-core sync` attaches to close the writers whose delivery Ray ended
            if record.get("type") == "attach" and not record["label"].startswith("sync-"):
                out[record["role"]] += 1
    return out


def test_one_run_per_job_in_slimes_ray_topology(ray_job: dict[str, Any], tmp_path: Path) -> None:
    default_dir, slime_dir = tmp_path / "default", tmp_path / "slime"
    default, default_info = run_job(ray_job, default_dir, "default")
    styled, styled_info = run_job(ray_job, slime_dir, "slime")
    ray_job["shutdown"]()  # Ray ends every actor; the training actors never called finish
    pids = [i["pid"] for _r, infos in ray_job["groups"].values() for i in infos]
    wait_until_gone(pids + [default_info["probe"]["pid"], styled_info["probe"]["pid"]])
    # The driver's finish waited for the training actors (which never call finish and are killed
    # by Ray) to deliver everything: their journals hold no value left to sync (at most the
    # close of a writer whose delivery process Ray ended with it).
    synced = [sync(d, stream=None) for d in (default_dir, slime_dir)]
    assert not any(r.errors or r.skipped_live for r in synced), synced
    assert [r.records for r in synced] == [0, 0], synced

    # install() reached the Ray workers: slime's own rollout code called the drop-ins
    for info in (default_info, styled_info):
        assert info["probe"]["patched"] is True
        assert [tuple(c) for c in info["probe"]["original_calls"]] == [("configure_logger", "")]
        assert info["probe"]["run_env"] is None  # the run came on args, pickled into the actor
        for role, _world, _tp, _pp, writer_rank in GROUPS:
            writers = [s["rank"] for s in info["starts"][role] if s["writer"]]
            assert writers == [writer_rank], (role, info["starts"][role])
    for _ranks, infos in ray_job["groups"].values():
        assert all(i["run_env"] is None for i in infos)

    expected_names = {*ACTOR_METRICS, *CRITIC_METRICS, *ROLLOUT_METRICS, *REDUCED, *PHASES}
    for handle, tdir in ((default, default_dir), (styled, slime_dir)):
        run = read_run(Path(handle.backends["jsonl"]["dir"]))
        # exactly one run: one handle, one jsonl run, one writer per role
        assert [p.parent.name for p in (tdir / "runs").glob("*/handle.json")] == [handle.run_id]
        assert [p.name for p in (tdir / "jsonl").iterdir()] == [handle.run_id]
        assert attaches(handle) == {"rollout": 1, "actor": 1, "critic": 1}
        assert run.status == "FINISHED"
        # exact counts, names as slime made them, steps on slime's axes
        assert run.metric_counts() == {name: STEPS for name in expected_names}
        for m in run.metrics:
            axis = "rollout/step" if m["name"].startswith("rollout/") else "train/step"
            assert m["step_key"] == axis and m["role"] in ("actor", "critic", "rollout")
            assert (m["role"] == "critic") == ("critic" in m["name"])
            if m["name"] in REDUCED:
                assert m["value"] == REDUCED[m["name"]], m
            elif m["name"].endswith("/slowest_rank"):
                assert m["value"] == {"actor": 0, "critic": 1}[m["role"]], m
        assert sorted({m["step"] for m in run.metrics}) == list(range(STEPS))
        for role in ("actor", "critic"):  # each role's trace: its counted rank's spans
            trace = json.loads((tdir / "runs" / handle.run_id / f"trace-{role}.json").read_text())
            spans = {(e["pid"], e["args"]["step"]) for e in trace["traceEvents"] if e["ph"] == "X"}
            assert spans == {({"actor": 0, "critic": 1}[role], s) for s in range(STEPS)}, (role, spans)

    # config keys by the convention: launch unprefixed, each role under its prefix
    run = read_run(Path(default.backends["jsonl"]["dir"]))
    launch = run.configs["launch"]["params"]
    actor, critic = run.configs["actor"]["params"], run.configs["critic"]["params"]
    assert launch["lr"] == pytest.approx(1e-6)
    assert actor["actor/lr"] == pytest.approx(1e-6) and critic["critic/lr"] == pytest.approx(1e-5)
    assert critic["critic/kl_coef"] == 0 and critic["critic/use_opd"] is False
    assert "critic/custom_advantage_function_path" not in critic  # forced null: no param
    assert critic["critic/untie_embeddings_and_output_weights"] is True
    assert critic["critic/disable_param_buffers_cpu_backup"] is False
    assert all(k.startswith("actor/") for k in actor) and all(k.startswith("critic/") for k in critic)
    assert all(k.startswith("rollout/") for k in run.configs["rollout"]["params"])
    assert not any("/" in k and k.split("/")[0] in ("actor", "critic", "rollout") for k in launch)
    # the Megatron layout each writer saw
    assert (actor["actor/parallel/tp"], actor["actor/parallel/pp"], actor["actor/parallel/rank"]) == (2, 1, 0)
    assert (critic["critic/parallel/tp"], critic["critic/parallel/pp"], critic["critic/parallel/rank"]) == (1, 2, 1)

    # the slime key style: slime's own config keys (actor unprefixed, critic/ prefixed)
    run = read_run(Path(styled.backends["jsonl"]["dir"]))
    assert run.configs["launch"]["params"] == {}
    actor, critic = run.configs["actor"]["params"], run.configs["critic"]["params"]
    base = load_fixture_namespaces(FIXTURES / "slime_ppo_args.json", ("base",))["base"]
    base.megatron_config_path = str(FIXTURES / "slime_megatron_roles.yaml")
    roles = resolve_role_args(base, base.megatron_config_path)
    tracking = tracking_option_dests()

    def job_keys(ns: argparse.Namespace) -> set[str]:
        """slime's keys that hold the job: no null value, no tracking option (both stay in the
        roles' JSON)."""
        return {k for k, v in vars(ns).items() if v is not None and k not in tracking}

    slime_keys = job_keys(roles["actor"]) | {f"critic/{k}" for k in job_keys(roles["critic"])}
    assert slime_keys <= set(actor) | set(critic)
    assert actor["lr"] == pytest.approx(1e-6) and critic["critic/lr"] == pytest.approx(1e-5)
    assert not set(actor) & set(critic)
