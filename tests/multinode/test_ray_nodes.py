"""Ray tears the job down: nothing a critic on another node logged is lost.

Two simulated nodes on one machine. node0 is this host: the Ray head (``ray.cluster_utils.
Cluster``) and slime's driver (this process). node1 (tests/helpers/nodes.py) has its own hostname,
its own ``$TRACKING_CORE_DIR``, working directory and ``$TMPDIR`` and a process tree of its own;
in its mount namespace node0's tracking directory is an empty tmpfs (node0's disk is not node1's),
and a CPU-bound process runs beside the job. node1 joins with ``ray start --address``. A real
``mlflow server`` on 127.0.0.1 is the only store the two share.

As slime runs a PPO job: the driver calls ``init_tracking(args)`` (slime's full launch config);
the critic, a Ray actor placed on node1, calls ``init_tracking(critic_args, primary=False,
role="critic")`` with slime's full critic config (the recorded ~1.4k keys and the role overrides)
and logs a few ``train/critic-*`` steps with ``log(args, ..., step_key="train/step")``; it never
calls ``finish_tracking``. The driver calls ``finish_tracking`` right after and shuts Ray down:
the job's actors end, and the critic's worker with them. Every value the critic logged more than
one flush interval before the end reaches MLflow, each exactly once, with no ``tracking-core
sync``; the critic's delivery process then exits by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slime_integration import tracking
from slime_integration.fixture_args import load_fixture_namespaces
from slime_integration.role_args import resolve_role_args
from tests.helpers.mlflow_server import MlflowServer, free_port
from tests.helpers.nodes import NodeProcess, SimulatedNode
from tracking_core.handle import ARGS_ATTR, RUN_ENV, RunHandle

ray = pytest.importorskip("ray")
from ray._common.utils import reset_ray_address  # noqa: E402
from ray._private.utils import read_ray_address  # noqa: E402

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STEPS = 4
CRITIC_METRICS = ("train/critic-value_loss", "train/critic-grad_norm")
RUN_ID_TAG = "tracking_core.run_id"
#: More than one flush interval (0.5 s) between the critic's last log and the driver's end.
BEFORE_THE_END = 1.0
#: How long MLflow is given to hold every critic value after the driver's end.
DELIVERED_WITHIN = 60.0


class Critic:
    """The critic's main rank, as slime's MegatronTrainRayActor makes its tracking calls."""

    def start(self, args: argparse.Namespace) -> dict[str, Any]:
        from slime_integration.tracking import init_tracking

        self.args = args
        run = init_tracking(args, primary=False, role="critic")
        delivery = getattr(run, "_delivery", None)
        deadline = time.monotonic() + 10
        while getattr(delivery, "pid", None) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return {
            "writer": bool(run is not None and run.is_writer),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "delivery": getattr(delivery, "pid", None),
        }

    def train_step(self, step: int) -> None:
        from slime_integration.tracking import log

        values = {name: _value(name, step) for name in CRITIC_METRICS}
        log(self.args, {**values, "train/step": step}, step_key="train/step")


def _value(name: str, step: int) -> float:
    return (1.0 if name.endswith("value_loss") else 10.0) / (step + 1)


def _ray_start(node: SimulatedNode, head: str, hidden: Path) -> NodeProcess:
    """node1's raylet (its workers inherit the node's environment), in a mount namespace where
    ``hidden`` (node0's tracking directory) is an empty tmpfs."""
    ports = {
        flag: str(free_port())
        for flag in (
            "--node-manager-port",
            "--object-manager-port",
            "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port",
            "--metrics-export-port",
            "--runtime-env-agent-port",
        )
    }
    ray_cli = Path(sys.executable).with_name("ray")
    return node.start(
        ["unshare", "--mount", "sh", "-c", 'mount -t tmpfs node0-disk "$0" && exec "$@"', hidden,
         ray_cli, "start", "--address", head, "--block", "--disable-usage-stats",
         "--num-cpus", "1", "--resources", json.dumps({"node1": 1}),
         "--object-store-memory", str(100 * 1024**2),
         *[part for flag, port in ports.items() for part in (flag, port)]],
        label="raylet",
    )  # fmt: skip


def _poll(what: str, check: Callable[[], Any], timeout: float, every: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last!r})")


def _node_ready(name: str) -> bool:
    return any(n["Alive"] and n["Resources"].get(name) for n in ray.nodes())


def _critic_history(uri: str, run_id: str) -> dict[str, list[tuple[int, float]]] | None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'")
    if len(runs) != 1:
        return None
    mlflow_run = runs[0].info.run_id
    return {
        name: sorted((m.step, m.value) for m in client.get_metric_history(mlflow_run, name))
        for name in CRITIC_METRICS
    }


@pytest.fixture
def ray_nodes(
    tmp_path: Path, simulated_nodes: list[SimulatedNode], mlflow_server: MlflowServer
) -> Iterator[dict[str, Any]]:
    """The head on node0 (this host), node1 joined and busy, this process the driver."""
    from ray.cluster_utils import Cluster

    node0_dir = tmp_path / "node0" / "tracking"
    node0_dir.mkdir(parents=True)
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith(("TRACKING_CORE_", "MLFLOW_"))]:
            mp.delenv(name)
        mp.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
        # Not the machine's "current cluster" (/tmp/ray/ray_current_cluster), which a bare
        # ray.init() elsewhere on this machine would join: this driver names its address.
        mp.setattr(ray._private.utils, "write_ray_address", lambda *args, **kwargs: None)
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "dashboard_agent_listen_port": free_port(),
            },
        )
        try:
            node1 = SimulatedNode(
                "node1",
                tmp_path / "nodes",
                env={
                    "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
                    "OMP_NUM_THREADS": "1",
                },
            )
            simulated_nodes.append(node1)
            raylet = _ray_start(node1, cluster.address, node0_dir)
            ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
            ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
            try:
                _poll("node1 in the cluster", lambda: _node_ready("node1"), 90, every=0.5)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{raylet.tail()}") from None
            if read_ray_address() == cluster.address:  # written by node1's `ray start`
                reset_ray_address()
            node1.start([sys.executable, "-c", "while True: pass"], label="busy")
            yield {"node0_dir": node0_dir, "node1": node1, "uri": mlflow_server.uri}
        finally:
            if ray.is_initialized():
                ray.shutdown()
            ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
            cluster.shutdown()


def test_ray_teardown_loses_nothing_the_critic_on_node1_logged(ray_nodes: dict[str, Any]) -> None:
    node1: SimulatedNode = ray_nodes["node1"]
    base = load_fixture_namespaces(FIXTURES / "slime_ppo_args.json", ("base",))["base"]
    base.megatron_config_path = str(FIXTURES / "slime_megatron_roles.yaml")
    base.tracking_backends, base.tracking_dir = "mlflow", str(ray_nodes["node0_dir"])
    tracking.init_tracking(base)  # the driver
    handle = RunHandle.parse(getattr(base, ARGS_ATTR))
    os.environ.pop(RUN_ENV, None)  # the critic finds the run on its args, as slime's actors do
    critic_args = resolve_role_args(base, base.megatron_config_path)["critic"]
    assert len(vars(critic_args)) > 1000  # slime's full role config
    critic = ray.remote(num_cpus=0, resources={"node1": 1})(Critic).remote()
    started = ray.get(critic.start.remote(critic_args), timeout=120)
    assert started["host"] == "node1" and started["writer"], started
    assert started["delivery"], started
    for step in range(STEPS):
        ray.get(critic.train_step.remote(step))
    time.sleep(BEFORE_THE_END)
    tracking.finish_tracking(base)  # the driver ends normally, right after
    ray.shutdown()  # and so does the job: Ray ends the critic's worker (it never called finish)

    # The critic's worker is gone: Ray tore it down.
    _poll("the critic's worker ended", lambda: not Path(f"/proc/{started['pid']}").exists(), 30)
    expected = {name: [(s, _value(name, s)) for s in range(STEPS)] for name in CRITIC_METRICS}
    seen: list[Any] = [None]

    def delivered() -> bool:
        seen[0] = _critic_history(ray_nodes["uri"], handle.run_id)
        return seen[0] == expected

    try:
        _poll("every critic value in MLflow", delivered, DELIVERED_WITHIN, every=1.0)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; MLflow holds {seen[0]}") from None
    # Each exactly once (nothing delivered twice), and the delivery process, done, exits by itself.
    time.sleep(1.0)
    assert _critic_history(ray_nodes["uri"], handle.run_id) == expected
    _poll(
        "the critic's delivery process exited",
        lambda: not Path(f"/proc/{started['delivery']}").exists(),
        30,
    )
    leftovers = [
        f"{pid}: {_cmdline(pid)!r}"
        for pid in node1.pids()
        if b"tracking_core" in _cmdline(pid) or b"keeper.py" in _cmdline(pid)
    ]
    assert leftovers == [], leftovers


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
