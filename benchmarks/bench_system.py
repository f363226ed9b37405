"""System metrics: what the node's sampler costs, per sample and per node at the default interval.

Three tables. **Per sample**: CPU time of one sample on the sampler's thread (reading the host
and the GPUs, and the ``log_metrics`` call into its writer), measured with the thread's own CPU
clock over ``--samples`` samples of a real run (jsonl) at a short interval, beside one raw read of
the same facts: ``/proc`` as the sampler reads it, psutil (``cpu_times``, ``virtual_memory``,
``disk_usage``, ``net_io_counters``) and NVML where there is a GPU; each also as % of one core
at the default interval (10 s; the target is at most 0.1 %). **Per node**: a run left idle for
``--seconds`` with system metrics off, then on at the default interval, the main thread asleep:
the sampler thread's CPU per sample, and everything the process and its delivery processes
spent, on minus off. **At start**: what ``start_sampler`` holds the calling (training) thread.

    python benchmarks/bench_system.py [--samples 100] [--seconds 60]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import cpu_seconds, median, table, us

logging.getLogger("tracking_core").setLevel(logging.ERROR)

DEFAULT_INTERVAL = 10.0
GOAL_PERCENT = 0.1


def percent(seconds_per_sample: float, interval: float = DEFAULT_INTERVAL) -> str:
    return f"{100.0 * seconds_per_sample / interval:.4f} %"


def thread_cpu(fn: Callable[[], Any], repeat: int) -> float:
    """Median CPU seconds of one ``fn()`` on this thread (its own clock), after two untimed calls."""
    fn()
    fn()
    samples = []
    for _ in range(repeat):
        begin = time.thread_time()
        fn()
        samples.append(time.thread_time() - begin)
    return median(samples)


def raw_reads(folder: Path, repeat: int) -> list[tuple[str, float]]:
    from tracking_core import system_readers

    rows: list[tuple[str, float]] = []
    reader, _ = system_readers.host_reader("/proc") if Path("/proc/stat").exists() else (None, "")
    if reader is not None:
        series = system_readers.HostSeries(reader, folder)

        def proc_sample() -> None:
            for _, part in series.parts():
                part()

        rows.append(("raw /proc read (cpu, memory, disk, network; as the sampler reads it)", thread_cpu(proc_sample, repeat)))
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        def psutil_sample() -> None:
            psutil.cpu_times()
            psutil.virtual_memory()
            psutil.disk_usage(str(folder))
            psutil.net_io_counters(pernic=True)

        rows.append((f"raw psutil {psutil.__version__} sample (cpu_times, virtual_memory, disk_usage, net_io_counters)", thread_cpu(psutil_sample, repeat)))
    gpus, why = system_readers.Gpus.open()
    if gpus is not None:
        rows.append((f"raw NVML read ({len(gpus.handles)} GPU(s): utilization, memory, power, temperature)", thread_cpu(lambda: gpus.read(lambda *_: None), repeat)))
        gpus.close()
    else:
        rows.append((f"raw NVML read: none here ({why})", float("nan")))
    return rows


def delivery_pids(run: Any, sampler: Any) -> list[int]:
    """The delivery processes of the run's writer and of the sampler's (started through a keeper,
    they are no descendants of this process)."""
    writers = [run] + ([sampler.run] if sampler is not None and sampler.run is not None else [])
    pids = [getattr(getattr(w, "_delivery", None), "pid", None) for w in writers]
    found = [pid for pid in pids if isinstance(pid, int)]
    assert len(found) == len(writers), f"a delivery process not found: {pids}"
    return found


def sampled_run(folder: Path, interval: str, seconds: float | None, samples: int | None) -> dict[str, float]:
    """A jsonl run with system metrics at ``interval`` (``"0"``: off), the main thread asleep
    until ``samples`` were taken or ``seconds`` passed; what it cost."""
    import tracking_core
    from tracking_core import system_metrics

    args = argparse.Namespace(tracking_system_metrics=interval)
    run = tracking_core.start_run(args=args, backends=["jsonl"], tracking_dir=folder, export=False)
    run.log_metrics({"x": 1.0}, step=0, step_key="train/step")
    run.flush(30)
    sampler = system_metrics.sampler_for(run.run_id)
    if sampler is not None:  # until the writer is open and the first sample in
        while sampler.samples < 1:
            time.sleep(0.01)
    time.sleep(1.0)  # the first deliveries done: the window sees the steady state
    pids = delivery_pids(run, sampler)
    helpers = {pid: cpu_seconds(pid) for pid in pids}
    process = time.process_time()
    thread = sampler.cpu_seconds if sampler else 0.0
    taken = sampler.samples if sampler else 0
    begin = time.monotonic()
    while True:
        time.sleep(0.05)
        if samples is not None and sampler is not None and sampler.samples - taken >= samples:
            break
        if seconds is not None and time.monotonic() - begin >= seconds:
            break
    wall = time.monotonic() - begin
    out = {
        "wall": wall,
        "process": time.process_time() - process,
        "helpers": sum(max(0.0, cpu_seconds(pid) - helpers[pid]) for pid in pids),
        "samples": float(sampler.samples - taken) if sampler else 0.0,
        "thread": (sampler.cpu_seconds - thread) if sampler else 0.0,
        "start": sampler.start_cpu_seconds if sampler else 0.0,
    }
    run.finish(timeout=30)
    if sampler is not None:
        sampler.stop()
    return out


def caller_cost(folder: Path, repeat: int) -> tuple[float, float]:
    """Wall time ``start_sampler`` holds its caller: off, and on (a lock and a thread)."""
    from tracking_core import system_metrics
    from tracking_core.handle import RunHandle

    off_args = argparse.Namespace(tracking_system_metrics="0")
    off = []
    for _ in range(repeat):
        begin = time.perf_counter()
        system_metrics.start_sampler(RunHandle("x", "x", str(folder)), args=off_args)
        off.append(time.perf_counter() - begin)
    on_args = argparse.Namespace(tracking_system_metrics="60")
    on = []
    for i in range(min(repeat, 20)):  # each a run of its own (no tracker): its lock, its thread
        handle = RunHandle(f"caller-{i}", "caller", str(folder))
        begin = time.perf_counter()
        sampler = system_metrics.start_sampler(handle, args=on_args)
        on.append(time.perf_counter() - begin)
        if sampler is not None:
            sampler.stop()
    return median(off), median(on)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=100, help="samples of the sampler at a short interval")
    parser.add_argument("--interval", default="0.1", help="that short interval, in seconds")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each arm of the per-node table runs")
    parser.add_argument("--repeat", type=int, default=200, help="raw reads timed")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        fast = sampled_run(tmp / "fast", opts.interval, None, opts.samples)
        per_sample = fast["thread"] / max(1.0, fast["samples"])
        rows = [[f"tracking-core sampler: one sample (read + log_metrics), {int(fast['samples'])} samples every {opts.interval} s", us(per_sample), percent(per_sample)]]
        for name, seconds in raw_reads(tmp, opts.repeat):
            rows.append([name, "-" if seconds != seconds else us(seconds), "-" if seconds != seconds else percent(seconds)])
        print(table(
            "System metrics: CPU per sample on the sampler's thread",
            f"python benchmarks/bench_system.py --samples {opts.samples}",
            ["what", "CPU per sample", f"% of one core at {DEFAULT_INTERVAL:g} s"],
            rows,
            f"Target: at most {GOAL_PERCENT} % of one core per node at the default interval. Thread CPU "
            "time (the thread's own clock); raw reads are medians of "
            f"{opts.repeat} calls on the main thread. Becoming the sampler (its writer attached, the "
            f"node's facts logged) cost {us(fast['start'])} of CPU once.",
        ))

        off = sampled_run(tmp / "off", "0", opts.seconds, None)
        on = sampled_run(tmp / "on", str(DEFAULT_INTERVAL), opts.seconds, None)
        thread = on["thread"] / max(1.0, on["samples"])
        node_rows = []
        for name, key in (("this process (sampler thread, its writer's pump)", "process"), ("its delivery processes", "helpers")):
            node_rows.append([
                name,
                f"{100 * off[key] / off['wall']:.3f} %",
                f"{100 * on[key] / on['wall']:.3f} %",
                f"{100 * (on[key] - off[key]) / on['wall']:+.3f} %",
            ])
        node_rows.append(["sampler thread alone", "-", f"{100 * on['thread'] / on['wall']:.4f} %", f"{us(thread)} per sample ({int(on['samples'])} samples)"])
        print(table(
            f"System metrics: a node's cost at the default interval ({DEFAULT_INTERVAL:g} s)",
            f"python benchmarks/bench_system.py --seconds {opts.seconds:g}",
            ["% of one core", "run, system metrics off", f"run, on ({DEFAULT_INTERVAL:g} s)", "on - off"],
            node_rows,
            f"Each arm {opts.seconds:g} s of an idle jsonl run (the main thread asleep), one after the "
            "other. Off, the process and its delivery process still poll (the run's own cost); on "
            "adds the sampler thread and a second writer (role system) with its delivery process.",
        ))

        off_s, on_s = caller_cost(tmp / "caller", 200)
        print(table(
            "System metrics: what start_sampler holds the caller (start_run / attach)",
            "python benchmarks/bench_system.py",
            ["system metrics", "caller's wall time (median)"],
            [["off (not asked for)", us(off_s)], ["on (lock file, thread started)", us(on_s)]],
            "The writer, the readers and NVML open on the sampler's thread, never the caller's.",
        ))


if __name__ == "__main__":
    main()
