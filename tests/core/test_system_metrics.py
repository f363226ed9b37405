"""Per-node system metrics (tracking_core.system_metrics), for real: the host's own /proc and
psutil, real processes of one node electing one sampler by a lock on its disk, two simulated nodes
(``unshare --uts``, each its own hostname and tracking directory) writing into one real MLflow
server, and a sample that fails because the OS refuses a read (``/proc/meminfo`` covered by an
empty file in a mount namespace of the test's own). Every run is read back with the trackers'
own readers. The GPU path runs where NVML finds a GPU, and is skipped elsewhere."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from tracking_jsonl.reader import find_run, read_run

import tracking_core
from tests.helpers.subprocess_python import JOBS, finish_python, python_env, start_python
from tracking_core import options as opts
from tracking_core import settings, system_metrics, system_readers

ROOT = Path(tracking_core.__file__).resolve().parents[1]  # the tree under test, for the workers
FAST = "0.2"  # seconds between samples in these tests
DROP = ("TRACKING_CORE_*", "MLFLOW_*", "GROUP_RANK", "NODE_RANK", "SLURM_NODEID")
HOST = system_metrics.host_key()
HOST_PARTS = ("cpu/utilization", "memory/used_percent", "memory/used_gib", "network/sent_mib_s", "network/recv_mib_s")
GPU_PARTS = ("utilization", "memory_used_gib", "power_w", "temperature_c")

#: One process of a job: the primary (MODE=primary) or a process attaching with the handle in
#: $TRACKING_CORE_RUN. It logs a training metric every 20 ms for SECONDS, holds on until the file
#: $HOLD exists (if set), finishes (the primary) or just exits, and says what its sampler did.
WORKER = JOBS / "system_metrics_worker.py"


def _env(tracking_dir: Path, **extra: str) -> dict[str, str]:
    env = {"TRACKING_CORE_DIR": str(tracking_dir), "PYTHONPATH": f"{ROOT}:{ROOT / 'plugins'}", "OMP_NUM_THREADS": "1"}
    env.update(extra)
    return env


def _start(tracking_dir: Path, *, wrap: list[str] | None = None, cwd: Path | None = None, **env: str) -> subprocess.Popen[str]:
    """The worker with ``env`` (``wrap``: a command that runs it, e.g. in another namespace)."""
    if wrap is None:
        return start_python(WORKER, env=_env(tracking_dir, **env), drop=DROP, cwd=cwd)
    return subprocess.Popen(
        [*wrap, sys.executable, str(WORKER)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=python_env(_env(tracking_dir, **env), drop=DROP),
        cwd=cwd,
    )


def _line(proc: subprocess.Popen[str], tag: str, timeout: float = 60.0) -> str:
    """The rest of the first stdout line starting with ``tag`` (lines before it are dropped)."""
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(tag + " "):
            return line[len(tag) + 1 :].strip()
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"no {tag} line from the worker; stderr:\n{(proc.stderr.read() if proc.stderr else '')[-4000:]}")


def _done(proc: subprocess.Popen[str]) -> tuple[dict[str, Any], str]:
    result = finish_python(proc, timeout=120)
    found = [line for line in result.stdout.splitlines() if line.startswith("DONE ")]
    assert found, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "after finish" not in result.stderr, result.stderr[-4000:]
    return json.loads(found[-1][5:]), result.stderr


def _run_alone(tracking_dir: Path, **env: str) -> tuple[dict[str, Any], str, str]:
    """The primary alone on a run (jsonl unless ``BACKENDS`` says): (what it said, its stderr,
    its run id)."""
    proc = _start(tracking_dir, MODE="primary", **{"BACKENDS": "jsonl", **env})
    handle = json.loads(_line(proc, "HANDLE"))
    done, stderr = _done(proc)
    return done, stderr, handle["run_id"]


def _system_series(records: list[dict[str, Any]], host: str = HOST) -> dict[str, list[tuple[int, float]]]:
    """name (without ``system/<host>/``) -> [(step, value)] of one host's system series."""
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    prefix = f"system/{host}/"
    for record in records:
        if record["name"].startswith(prefix):
            assert record["step_key"] == f"{prefix}sample", record
            out[record["name"][len(prefix) :]].append((record["step"], record["value"]))
    return out


def _check_host_ranges(series: dict[str, list[tuple[int, float]]], total_gib: float) -> None:
    for part in HOST_PARTS:
        assert series.get(part), (part, sorted(series))
    disks = [name for name in series if name.startswith("disk/") and name.endswith("/used_percent")]
    assert len(disks) == 1, sorted(series)
    for name, points in series.items():
        values = [v for _, v in points]
        if name.endswith(("utilization", "used_percent")):
            assert all(0.0 <= v <= 100.0 for v in values), (name, values)
        elif name == "memory/used_gib":
            assert all(0.0 < v < total_gib for v in values), (name, values, total_gib)
        elif name.startswith("network/"):
            assert all(0.0 <= v < 100_000 for v in values), (name, values)
    memory = [v for _, v in series["memory/used_percent"]]
    assert all(v > 0.0 for v in memory)


def _total_gib() -> float:
    return system_readers.ProcReader().memory()[0] / system_readers.GIB


def _mlflow_run(client: Any, run_id: str, timeout: float = 90.0) -> Any:
    """The job's one MLflow run, found by its tag (waiting for the primary to open it)."""
    deadline = time.monotonic() + timeout
    while True:
        found = client.search_runs(
            [e.experiment_id for e in client.search_experiments()], f"tags.`tracking_core.run_id` = '{run_id}'"
        )
        if found or time.monotonic() > deadline:
            assert len(found) == 1, found
            return found[0]
        time.sleep(0.5)


def _steps_of(series: dict[str, list[tuple[int, float]]], name: str = "memory/used_percent") -> list[int]:
    return [step for step, _ in series[name]]


# -- settings ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (None, None), ("", None), ("1", 10.0), ("yes", 10.0), ("ON", 10.0), ("0", 0.0), ("off", 0.0),
        ("2.5", 2.5), ("30s", 30.0), ("1.0", 1.0), ("0.01", settings.MIN_SYSTEM_INTERVAL),
    ],
)  # fmt: skip
def test_the_setting_is_one_zero_or_seconds(text: str | None, seconds: float | None) -> None:
    assert settings.system_interval(text) == seconds


@pytest.mark.parametrize("text", ["-3", "soon", "nan", "inf"])
def test_a_setting_that_is_neither_is_off_with_a_warning(text: str, caplog: pytest.LogCaptureFixture) -> None:
    assert settings.system_interval(text) == 0.0
    assert "TRACKING_CORE_SYSTEM_METRICS" in caplog.text and "system metrics are off" in caplog.text


#: A process that starts the run and attaches a role (each asks for the interval), logs, finishes.
TWO_CALLS = JOBS / "system_metrics_two_calls.py"


@pytest.mark.parametrize(
    ("text", "interval"), [("1e10", settings.MAX_SYSTEM_INTERVAL), ("86401", settings.MAX_SYSTEM_INTERVAL), ("inf", None), ("nan", None), ("-5", None)]
)
def test_an_interval_past_the_most_is_clamped_and_a_hostile_one_is_off_with_one_warning(
    tmp_path: Path, text: str, interval: float | None
) -> None:
    """An interval too long to wait for (``1e10`` s overflowed the thread waits of the sampler's
    writer) samples at the stated most, a day; infinite, NaN or negative ones are off. Either is
    one warning in a process that starts a run and attaches a role, and the run goes on."""
    proc = start_python(TWO_CALLS, env=_env(tmp_path, TRACKING_CORE_SYSTEM_METRICS=text), drop=DROP)
    result = finish_python(proc, timeout=120)
    done = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("DONE "))[5:])
    assert done["interval"] == interval, (done, result.stderr[-3000:])
    assert done["summary"].startswith("run FINISHED") and "NOT delivered" not in done["summary"], done
    said = [line for line in result.stderr.splitlines() if "TRACKING_CORE_SYSTEM_METRICS" in line]
    assert len(said) == 1 and said[0].startswith("WARNING"), result.stderr[-3000:]
    assert ("86400" in said[0]) == (interval is not None), said
    assert "Fatal Python error" not in result.stderr and "Traceback" not in result.stderr, result.stderr[-3000:]


def test_the_option_comes_before_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    assert "--tracking-system-metrics" in tracking_core.add_tracking_options(parser).added
    monkeypatch.delenv(settings.SYSTEM_METRICS, raising=False)
    assert opts.system_metrics_interval(parser.parse_args([])) is None  # off unless asked
    assert opts.system_metrics_interval(parser.parse_args(["--tracking-system-metrics"])) == 10.0
    assert opts.system_metrics_interval(parser.parse_args(["--tracking-system-metrics", "2.5"])) == 2.5
    monkeypatch.setenv(settings.SYSTEM_METRICS, "1")
    assert opts.system_metrics_interval(parser.parse_args([])) == 10.0
    assert opts.system_metrics_interval(parser.parse_args(["--tracking-system-metrics", "0"])) is None


def test_node_rank_from_the_launchers_variables() -> None:
    assert system_metrics.node_rank({}) is None
    assert system_metrics.node_rank({"SLURM_NODEID": "3"}) == (3, "SLURM_NODEID")
    assert system_metrics.node_rank({"GROUP_RANK": "1", "NODE_RANK": "2"}) == (1, "GROUP_RANK")
    assert system_metrics.node_rank({"GROUP_RANK": "x", "NODE_RANK": "2"}) == (2, "NODE_RANK")


# -- readers ----------------------------------------------------------------------------------
@pytest.mark.parametrize("prefer", ["/proc", "psutil"])
def test_each_reader_gives_the_host_series_in_range(prefer: str, tmp_path: Path) -> None:
    if prefer == "psutil":
        pytest.importorskip("psutil", reason="psutil is not installed here")
    if prefer == "/proc" and not Path("/proc/stat").exists():
        pytest.skip("no /proc here")
    reader, why = system_readers.host_reader(prefer)
    assert reader is not None and reader.source == prefer, why
    series = system_readers.HostSeries(reader, tmp_path)
    deadline = time.perf_counter() + 0.3
    while time.perf_counter() < deadline:  # some CPU time to measure
        sum(range(10_000))
    values: dict[str, float] = {}
    for _, part in series.parts():
        values.update(part())
    total_gib = _total_gib()
    _check_host_ranges({k: [(0, v)] for k, v in values.items()}, total_gib)
    assert values["cpu/utilization"] > 0.0  # this process was busy meanwhile
    assert series.facts()["memory_gib"] == pytest.approx(total_gib, abs=0.01)
    assert series.facts()["cpus"] == os.cpu_count()


def test_the_disk_is_named_by_its_mount_point(tmp_path: Path) -> None:
    assert system_readers.mount_key("/") == "root"
    assert system_readers.mount_key("/data/nvme0") == "data_nvme0"
    mount = system_readers.mount_of(tmp_path / "not" / "yet")
    assert os.path.ismount(mount) and str(tmp_path.resolve()).startswith(mount)


# -- one process: off unless asked, series in a real tracker ----------------------------------
def test_off_unless_asked(tmp_path: Path) -> None:
    done, _, run_id = _run_alone(tmp_path / "unset", SECONDS="0.5")
    assert done["samples"] == 0 and not any(t.startswith("tracking-core-system") for t in done["threads"])
    assert "system.jsonl" not in read_run(find_run(run_id, str(tmp_path / "unset"))).files
    assert not list((tmp_path / "unset").rglob("system-metrics-*.lock"))
    # --tracking-system-metrics 0 wins over the variable
    done, _, run_id = _run_alone(tmp_path / "zero", SECONDS="0.5", OPTION="0", TRACKING_CORE_SYSTEM_METRICS=FAST)
    assert done["samples"] == 0
    assert "system.jsonl" not in read_run(find_run(run_id, str(tmp_path / "zero"))).files


def test_host_series_reach_jsonl_in_range(tmp_path: Path) -> None:
    done, stderr, run_id = _run_alone(tmp_path, TRACKING_CORE_SYSTEM_METRICS=FAST, NODE_RANK="3", SECONDS="2")
    assert done["samples"] > 0 and not done["sampler_thread_is_main"]
    # the primary's finish ended the sampling of its node first: no writer left delivering
    assert "still deliver" not in stderr and "NOT delivered" not in stderr, stderr[-3000:]
    assert done["summary"].startswith("run FINISHED") and not done["threads_after_finish"], done
    run = read_run(find_run(run_id, str(tmp_path)))
    series = _system_series(run.metrics)
    _check_host_ranges(series, _total_gib())
    steps = _steps_of(series)
    assert len(steps) >= 3 and steps == list(range(len(steps))), steps  # 2 s at 0.2 s, numbered
    assert len(steps) >= done["samples"]  # those taken up to the finish, and the last at exit
    # the node's facts in the system role's config, under system/<host>/
    params = run.configs[f"system-{HOST}"]["params"]
    assert params[f"system/{HOST}/node_rank"] == 3 and params[f"system/{HOST}/node_rank_from"] == "NODE_RANK"
    assert params[f"system/{HOST}/cpus"] == os.cpu_count() and params[f"system/{HOST}/host"] == socket.gethostname()
    # training logged every step, and no system series under any other name
    assert run.metric_counts()["train/loss"] == done["steps"]
    assert {m["name"].split("/")[0] for m in run.metrics} == {"train", "system"}
    gpus, why = system_readers.Gpus.open()
    if gpus is None:  # without NVML or a GPU: host series only, said once
        assert not [n for n in series if n.startswith("gpu")]
        assert stderr.count("host series only") == 1 and why in stderr, stderr[-3000:]
    else:
        gpus.close()


@pytest.mark.slow
def test_host_series_reach_an_mlflow_server(tmp_path: Path, mlflow_server: Any) -> None:
    from mlflow.tracking import MlflowClient

    proc = _start(tmp_path, MODE="primary", BACKENDS="mlflow", MLFLOW_TRACKING_URI=mlflow_server.uri, TRACKING_CORE_SYSTEM_METRICS=FAST, SECONDS="2")
    run_id = json.loads(_line(proc, "HANDLE"))["run_id"]
    done, _ = _done(proc)
    client = MlflowClient(mlflow_server.uri)
    mlrun = _mlflow_run(client, run_id)
    keys = [k for k in mlrun.data.metrics if k.startswith(f"system/{HOST}/")]
    series = {
        k.removeprefix(f"system/{HOST}/"): [(m.step, m.value) for m in client.get_metric_history(mlrun.info.run_id, k)]
        for k in keys
    }
    _check_host_ranges(series, _total_gib())
    steps = sorted(_steps_of(series))
    assert steps == list(range(len(steps))) and len(steps) >= max(3, done["samples"])
    assert mlrun.data.params[f"system/{HOST}/cpus"] == str(os.cpu_count())


@pytest.mark.slow
def test_host_series_reach_tensorboard_and_wandb_as_their_own_series(tmp_path: Path) -> None:
    """TensorBoard: scalars in the run's system subdirectory; W&B (offline): the system writer's
    own history rows, each series defined on the axis system/<host>/sample."""
    from tests.helpers.tb_events import read_logdir
    from tests.helpers.wandb_offline import offline_env, read_job

    env = offline_env(tmp_path)
    done, _, run_id = _run_alone(tmp_path / "tracking", BACKENDS="tensorboard,wandb", TRACKING_CORE_SYSTEM_METRICS=FAST, SECONDS="2", **env)
    axis = f"system/{HOST}/sample"
    boards = read_logdir(next((tmp_path / "tracking" / "tensorboard").iterdir()))
    tb_series = {
        tag.removeprefix(f"system/{HOST}/"): points for tag, points in boards["system"].scalars.items()
    }
    _check_host_ranges(tb_series, _total_gib())
    assert _steps_of(tb_series) == list(range(len(tb_series["memory/used_percent"])))
    runs = read_job(env["WANDB_DIR"], run_id)
    # The system writer's own directory, and a sync's where its delivery was cut short (a loaded
    # machine): together every sample once.
    system = [r for r in runs if "-system-" in r.path.name]
    assert system, [r.path.name for r in runs]
    records = [rec for r in system for rec in r.records]
    rows = sorted((rec["history"]["item"] for rec in records if rec.get("type") == "history"), key=lambda row: row[axis])
    wb_series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in rows:
        for key, value in row.items():
            if key.startswith(f"system/{HOST}/") and key != axis:
                wb_series[key.removeprefix(f"system/{HOST}/")].append((row[axis], float(value)))
    _check_host_ranges(wb_series, _total_gib())
    assert [row[axis] for row in rows] == list(range(len(rows))) and len(rows) >= max(3, done["samples"])
    defined = {
        rec["metric"]["name"]: rec["metric"].get("step_metric")
        for rec in records
        if rec.get("type") == "metric"
    }
    assert defined[f"system/{HOST}/cpu/utilization"] == axis


# -- one node, several processes -------------------------------------------------------------
def test_one_sampler_per_node_and_a_standby_takes_over(tmp_path: Path) -> None:
    """The primary does not sample (its option says 0); of two processes attaching on the same
    node (one writer, one not), the first samples and the second stands by; when the first ends,
    the second takes over, numbering on. One series set, every sample number once."""
    hold = tmp_path / "hold"
    primary = _start(tmp_path, MODE="primary", BACKENDS="jsonl", OPTION="0", SECONDS="0", HOLD=str(hold))
    handle = _line(primary, "HANDLE")
    common = {"TRACKING_CORE_RUN": handle, "TRACKING_CORE_SYSTEM_METRICS": FAST}
    first = _start(tmp_path, MODE="attach", ROLE="actor", WRITER="1", SECONDS="1.5", **common)
    assert json.loads(_line(first, "SAMPLER"))["sampling"]
    second = _start(tmp_path, MODE="attach", ROLE="actor", WRITER="0", SECONDS="4", **common)
    assert not json.loads(_line(second, "SAMPLER"))["sampling"]
    first_done, _ = _done(first)
    second_done, stderr = _done(second)
    assert "takes over" in stderr
    hold.write_text("")
    primary_done, _ = _done(primary)
    assert primary_done["samples"] == 0 and first_done["samples"] >= 1 and second_done["samples"] >= 1
    run = read_run(find_run(json.loads(handle)["run_id"], str(tmp_path)))
    series = _system_series(run.metrics)
    steps = _steps_of(series)
    assert steps == list(range(len(steps))), steps  # each number once: never two samplers at once
    assert len(steps) >= first_done["samples"] + second_done["samples"]
    system_lines = [json.loads(line) for line in (run.path / "system.jsonl").read_text().splitlines()]
    writers = [line["label"] for line in system_lines if line.get("type") == "attach"]
    assert len(writers) == 2, writers  # one writer at a time: the first's, then the second's
    assert len(list(tmp_path.rglob("system-metrics-*.lock"))) == 1


def test_one_sampler_per_node_when_its_lock_file_is_deleted_mid_run(tmp_path: Path) -> None:
    """Two processes of one node, the first sampling, the second standing by; the node's lock
    file is deleted while both run (a /tmp cleaner, an ``rm`` of old runs). The second must not
    sample beside the first: each sample number of ``system/<host>/...`` holds one value, the
    numbers run on without a gap while the first samples and after the second takes over, and
    the file is back."""
    hold = tmp_path / "hold"
    primary = _start(tmp_path, MODE="primary", BACKENDS="jsonl", OPTION="0", SECONDS="0", HOLD=str(hold))
    handle = _line(primary, "HANDLE")
    common = {"TRACKING_CORE_RUN": handle, "TRACKING_CORE_SYSTEM_METRICS": FAST}
    first = _start(tmp_path, MODE="attach", ROLE="actor", WRITER="1", SECONDS="3", **common)
    assert json.loads(_line(first, "SAMPLER"))["sampling"]
    second = _start(tmp_path, MODE="attach", ROLE="rollout", WRITER="0", SECONDS="5", **common)
    assert not json.loads(_line(second, "SAMPLER"))["sampling"]
    time.sleep(0.6)  # a few samples, and the second has tried the lock
    locks = list(tmp_path.rglob("system-metrics-*.lock"))
    assert len(locks) == 1, locks
    locks[0].unlink()
    first_done, _ = _done(first)
    second_done, _ = _done(second)
    hold.write_text("")
    _done(primary)
    assert locks[0].exists()  # the sampler wrote it again
    run = read_run(find_run(json.loads(handle)["run_id"], str(tmp_path)))
    series = _system_series(run.metrics)
    for part in HOST_PARTS:
        per_step = Counter(step for step, _ in series[part])
        twice = sorted(step for step, count in per_step.items() if count > 1)
        assert not twice, f"{part}: two samplers at once, steps {twice} hold two values"
    steps = _steps_of(series)
    assert steps == list(range(len(steps))), steps
    # the first sampled through the deletion (3 s at 0.2 s); the second took over when it ended
    assert first_done["samples"] >= 8 and second_done["samples"] >= 1, (first_done, second_done)
    assert len(steps) >= first_done["samples"] + second_done["samples"]


def test_the_nodes_rank_stays_when_a_process_of_another_launch_takes_over(tmp_path: Path) -> None:
    """The node's rank in the system config is the node's: a process of another launch on the
    same node (its launcher numbers nodes otherwise) that takes the sampling over keeps the rank
    the first sampler recorded, so no tracker sees the node's rank change."""
    hold = tmp_path / "hold"
    primary = _start(tmp_path, MODE="primary", BACKENDS="jsonl", OPTION="0", SECONDS="0", HOLD=str(hold))
    handle = _line(primary, "HANDLE")
    common = {"TRACKING_CORE_RUN": handle, "TRACKING_CORE_SYSTEM_METRICS": FAST}
    first_hold = tmp_path / "first-hold"
    first = _start(tmp_path, MODE="attach", ROLE="actor", WRITER="1", SECONDS="0.5", HOLD=str(first_hold), GROUP_RANK="1", **common)
    assert json.loads(_line(first, "SAMPLER"))["sampling"]
    second = _start(tmp_path, MODE="attach", ROLE="rollout", WRITER="1", SECONDS="3", SLURM_NODEID="0", **common)
    assert not json.loads(_line(second, "SAMPLER"))["sampling"]
    first_hold.write_text("")
    _done(first)
    second_done, stderr = _done(second)
    hold.write_text("")
    _done(primary)
    assert "takes over" in stderr and second_done["samples"] >= 1, (second_done, stderr[-2000:])
    run = read_run(find_run(json.loads(handle)["run_id"], str(tmp_path)))
    lines = [json.loads(line) for line in (run.path / "system.jsonl").read_text().splitlines()]
    configs = [line["params"] for line in lines if line.get("type") == "config"]
    assert len(configs) == 2, configs  # each sampler's writer said the node's facts
    ranks = {(c.get(f"system/{HOST}/node_rank"), c.get(f"system/{HOST}/node_rank_from")) for c in configs}
    assert ranks == {(1, "GROUP_RANK")}, ranks


def test_the_primarys_finish_ends_its_nodes_sampling(tmp_path: Path) -> None:
    """The primary samples; a process of the same node stands by and lives on after the
    primary's finish. The finish ends the node's sampling: the primary's sampler is gone when
    finish returns, and the process standing by does not take over a run that is closed."""
    hold = tmp_path / "hold"  # the primary finishes once the other process stands by
    primary = _start(tmp_path, MODE="primary", BACKENDS="jsonl", TRACKING_CORE_SYSTEM_METRICS=FAST, HOLD=str(hold))
    handle = _line(primary, "HANDLE")
    assert json.loads(_line(primary, "SAMPLER"))["sampling"]
    other = _start(tmp_path, MODE="attach", ROLE="rollout", WRITER="0", SECONDS="4", TRACKING_CORE_RUN=handle, TRACKING_CORE_SYSTEM_METRICS=FAST)
    assert not json.loads(_line(other, "SAMPLER"))["sampling"]
    hold.write_text("")
    primary_done, _ = _done(primary)
    other_done, stderr = _done(other)
    assert primary_done["samples"] >= 3 and not primary_done["threads_after_finish"]
    assert other_done["samples"] == 0 and "takes over" not in stderr
    run = read_run(find_run(json.loads(handle)["run_id"], str(tmp_path)))
    lines = [json.loads(line) for line in (run.path / "system.jsonl").read_text().splitlines()]
    assert len([line for line in lines if line.get("type") == "attach"]) == 1


# -- two nodes -----------------------------------------------------------------------------------
def _can_unshare(*flags: str) -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", *flags, "true"], capture_output=True)
    return probe.returncode == 0


def _on_node(name: str) -> list[str]:
    """A command prefix that runs the rest with its own hostname, as on another node."""
    return ["unshare", "--uts", "sh", "-c", f'hostname {name} && exec "$@"', "node"]


@pytest.mark.slow
@pytest.mark.skipif(not _can_unshare("--uts"), reason="simulating a node needs root and unshare --uts")
def test_two_nodes_one_series_set_each(tmp_path: Path, mlflow_server: Any) -> None:
    """node-a runs the primary, node-b two processes that attach (a writer and a non-writer);
    each node its own hostname, tracking directory and working directory; the MLflow server the
    only thing they share. Each node's series arrive once, every sample number once. node-b's
    sampler outlives the primary's finish: the run still ends FINISHED, no writer named
    incomplete, and node-b's later samples arrive too."""
    from mlflow.tracking import MlflowClient

    dirs = {n: tmp_path / n for n in ("node-a", "node-b")}
    for folder in dirs.values():
        (folder / "work").mkdir(parents=True)
    server = {"MLFLOW_TRACKING_URI": mlflow_server.uri}
    hold_a, hold_b = tmp_path / "hold-a", tmp_path / "hold-b"
    primary = _start(dirs["node-a"] / "tracking", wrap=_on_node("node-a"), cwd=dirs["node-a"] / "work",
                     MODE="primary", BACKENDS="mlflow", HOLD=str(hold_a), GROUP_RANK="0",
                     TRACKING_CORE_SYSTEM_METRICS=FAST, **server)  # fmt: skip
    handle = _line(primary, "HANDLE")
    # node-b samples every second: between two samples its writer catches up with MLflow (one
    # request at most every 2 s), so a finishing primary finds it caught up, not owing data
    workers = [
        _start(dirs["node-b"] / "tracking", wrap=_on_node("node-b"), cwd=dirs["node-b"] / "work",
               MODE="attach", ROLE="critic", WRITER=writer, TRACKING_CORE_RUN=handle, GROUP_RANK="1", HOLD=str(hold_b),
               TRACKING_CORE_SYSTEM_METRICS="1.0", **server)
        for writer in ("1", "0")
    ]  # fmt: skip
    assert sorted(json.loads(_line(w, "SAMPLER"))["sampling"] for w in workers) == [False, True]
    client = MlflowClient(mlflow_server.uri)
    run_id = json.loads(handle)["run_id"]
    mlrun = _mlflow_run(client, run_id)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # both nodes' series arrive while the job runs
        keys = set(client.get_run(mlrun.info.run_id).data.metrics)
        if {f"system/{h}/memory/used_percent" for h in ("node-a", "node-b")} <= keys:
            break
        time.sleep(0.5)
    hold_a.write_text("")
    node_a, _ = _done(primary)
    closed = client.get_run(mlrun.info.run_id)
    assert closed.info.status == "FINISHED" and "tracking_core.incomplete" not in closed.data.tags, closed.data.tags
    time.sleep(2.5)  # node-b samples on after the run's end
    hold_b.write_text("")
    node_b = [_done(w)[0] for w in workers]
    assert node_a["samples"] >= 3 and sum(d["samples"] for d in node_b) >= 3

    mlrun = _mlflow_run(client, run_id)
    hosts = Counter(k.split("/")[1] for k in mlrun.data.metrics if k.startswith("system/"))
    assert set(hosts) == {"node-a", "node-b"}, hosts
    assert hosts["node-a"] == hosts["node-b"]  # the same series set on each node
    for host, samples in (("node-a", node_a["samples"]), ("node-b", sum(d["samples"] for d in node_b))):
        steps = sorted(m.step for m in client.get_metric_history(mlrun.info.run_id, f"system/{host}/memory/used_percent"))
        assert steps == list(range(len(steps))) and len(steps) >= samples, (host, steps)
    params = mlrun.data.params
    assert params["system/node-a/node_rank"] == "0" and params["system/node-b/node_rank"] == "1"
    assert mlrun.info.status == "FINISHED" and "tracking_core.incomplete" not in mlrun.data.tags
    late = client.get_metric_history(mlrun.info.run_id, "system/node-b/memory/used_percent")
    assert mlrun.info.end_time == closed.info.end_time  # closed once
    assert max(m.timestamp for m in late) > mlrun.info.end_time  # sampled on after the close
    # each node's lock in its own tracking directory, named for the node
    assert [p.name for p in dirs["node-a"].rglob("*.lock") if "system" in p.name] == ["system-metrics-node-a.lock"]
    assert [p.name for p in dirs["node-b"].rglob("*.lock") if "system" in p.name] == ["system-metrics-node-b.lock"]


@pytest.mark.skipif(not _can_unshare("--uts"), reason="simulating a node needs root and unshare --uts")
def test_a_tracking_directory_shared_by_two_nodes_still_samples_each(tmp_path: Path) -> None:
    """Two nodes whose $TRACKING_CORE_DIR is one shared folder (NFS, say): the lock is per node
    (its name holds the host's), so each node samples; a lock per folder would elect one."""
    hold = tmp_path / "hold"
    env = {"TRACKING_CORE_SYSTEM_METRICS": FAST}
    primary = _start(tmp_path, wrap=_on_node("node-a"), MODE="primary", BACKENDS="jsonl", HOLD=str(hold), **env)
    handle = _line(primary, "HANDLE")
    worker = _start(tmp_path, wrap=_on_node("node-b"), MODE="attach", ROLE="critic", WRITER="0", TRACKING_CORE_RUN=handle, SECONDS="2.5", **env)
    assert json.loads(_line(worker, "SAMPLER"))["sampling"]
    _done(worker)
    hold.write_text("")
    _done(primary)
    run = read_run(find_run(json.loads(handle)["run_id"], str(tmp_path)))
    for host in ("node-a", "node-b"):
        steps = _steps_of(_system_series(run.metrics, host))
        assert len(steps) >= 3 and steps == list(range(len(steps))), (host, steps)


# -- faults ----------------------------------------------------------------------------------
@pytest.mark.skipif(not _can_unshare("--mount"), reason="covering /proc/meminfo needs root and unshare --mount")
def test_a_failing_sample_does_not_stop_training(tmp_path: Path) -> None:
    """/proc/meminfo reads as an empty file (bind-mounted over, in a mount namespace of this
    test's own): every sample's memory part fails. The other series go on, training logs every
    step at its pace, one warning says what failed, and the process exits 0."""
    empty = tmp_path / "empty"
    empty.write_text("")
    wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'mount --bind {empty} /proc/meminfo && exec "$@"', "node"]
    proc = _start(tmp_path, wrap=wrap, MODE="primary", BACKENDS="jsonl", TRACKING_CORE_SYSTEM_METRICS=FAST, SECONDS="2")
    run_id = json.loads(_line(proc, "HANDLE"))["run_id"]
    done, stderr = _done(proc)
    run = read_run(find_run(run_id, str(tmp_path)))
    series = _system_series(run.metrics)
    assert not [n for n in series if n.startswith("memory/")]
    assert len(_steps_of(series, "cpu/utilization")) >= 3 and series["network/sent_mib_s"]
    assert run.metric_counts()["train/loss"] == done["steps"]
    assert done["longest_step_s"] < 0.5  # the loop was never held up
    assert stderr.count("reading memory failed") == 1, stderr[-3000:]


# -- GPUs --------------------------------------------------------------------------------------
def _gpus() -> tuple[int, str]:
    gpus, why = system_readers.Gpus.open()
    if gpus is None:
        return 0, why
    count = len(gpus.handles)
    gpus.close()
    return count, ""


@pytest.mark.skipif(not _gpus()[0], reason=f"the GPU series need NVML and a GPU: {_gpus()[1]}")
def test_gpu_series_where_nvml_finds_gpus(tmp_path: Path) -> None:
    count = _gpus()[0]
    done, stderr, run_id = _run_alone(tmp_path, TRACKING_CORE_SYSTEM_METRICS=FAST)
    run = read_run(find_run(run_id, str(tmp_path)))
    series = _system_series(run.metrics)
    _check_host_ranges({k: v for k, v in series.items() if not k.startswith("gpu")}, _total_gib())
    assert "host series only" not in stderr
    for index in range(count):
        got = {part: [v for _, v in series.get(f"gpu{index}/{part}", [])] for part in GPU_PARTS}
        assert got["utilization"] and all(0 <= v <= 100 for v in got["utilization"]), got
        assert got["memory_used_gib"] and all(0 <= v < 1024 for v in got["memory_used_gib"]), got
        assert got["temperature_c"] and all(0 < v < 120 for v in got["temperature_c"]), got
        assert all(0 < v < 2000 for v in got["power_w"]), got  # where the board reports it
    params = run.configs[f"system-{HOST}"]["params"]
    assert params[f"system/{HOST}/gpus"] == count and params[f"system/{HOST}/gpu_names"]
