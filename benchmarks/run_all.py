"""Run every benchmark and write BENCHMARKS.md with exactly what they print.

    python benchmarks/run_all.py [--quick] [--output FILE] [--revision TEXT]

Each benchmark runs in its own interpreter, one after the other (the machine is shared: nothing
else of ours runs meanwhile), in the order of :data:`BENCHMARKS`: import time and the core's
caller cost, the config pipeline, the caller cost against the raw trackers, `start_run` latency
against the raw trackers' start (a down tracker included), MLflow delivery throughput, the
training-loop slowdown, journal disk use over a long run, tables and artifacts, the demo job. `--quick` passes smaller
sizes, for a smoke check (about 3 minutes; the full run takes about 15-20).

The tree measured is the one this file is in (its tracking_core/ and plugins/ come first on
PYTHONPATH). bench_caller compares with Accelerate where it is importable: it is no dependency
of the project, so put a folder holding it on PYTHONPATH to get that row
(`pip install --target DIR --no-deps accelerate psutil huggingface_hub safetensors`).
`TRACKING_CORE_SEGMENT_BYTES` is unset for the benchmarks: bench_journal measures the default.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

BENCHMARKS = [
    # script, full-run arguments, --quick arguments
    ("bench_core.py", [], []),  # import time, caller cost with a no-op backend
    ("bench_config.py", ["--repeat", "50"], ["--repeat", "5"]),
    ("bench_caller.py", [], ["--calls", "300", "--slow-calls", "50"]),
    ("bench_start.py", [], ["--starts", "3", "--down-tries", "1"]),  # start_run vs raw starts
    ("bench_delivery.py", [], ["--rows", "200", "--per-call", "50", "--rounds", "1"]),
    ("bench_loop.py", [], ["--seconds", "2", "--rounds", "1"]),
    ("bench_journal.py", [], ["--calls", "50000", "--paced-seconds", "5"]),  # disk use
    ("bench_records.py", [], ["--tables", "60", "--files", "2", "--file-mib", "16", "--rounds", "1"]),
    ("bench_demo.py", [], []),
    ("bench_system.py", [], ["--samples", "20", "--seconds", "5"]),  # the per-node sampler's cost
    ("bench_nodes.py", ["--nodes", "1,2,4,8"], ["--nodes", "1", "--seconds", "10"]),  # root: unshare --uts
]


def versions() -> str:
    out = []
    for dist in ("tracking-core", "torch", "wandb", "mlflow", "tensorboardX", "megatron-core", "accelerate"):
        try:
            out.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(out)


def revision() -> str:
    """The commit the benchmarked tree is at, where it is a git checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True, text=True, check=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"))
    parser.add_argument("--revision", default=None, help="what the header says was measured")
    opts = parser.parse_args()
    rev = opts.revision or revision()
    header = (
        "# Benchmarks\n\n"
        f"Produced by `python benchmarks/run_all.py` on {time.strftime('%Y-%m-%d')}"
        f"{f' at {rev}' if rev else ''}: "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {versions()}. "
        "Every table below is what the command beside it printed in this one run; the machine "
        "is shared, so absolute times are indicative and the ratios are what to read.\n"
    )
    print(header)
    sections = [header]
    # The benchmarks, the tree they measure and its plugins come first; what the caller had on
    # PYTHONPATH (e.g. a folder with accelerate for bench_caller's comparison) stays after them.
    path = [str(HERE), str(ROOT), str(ROOT / "plugins"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p), "WANDB_SILENT": "true"}
    env.pop("TRACKING_CORE_SEGMENT_BYTES", None)  # bench_journal measures the default
    total = time.perf_counter()
    failed = 0
    for script, full, quick in BENCHMARKS:
        args = quick if opts.quick else full
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(HERE / script), *args],
            cwd=ROOT, env=env, capture_output=True, text=True,
        )  # fmt: skip
        # Keep only the markdown the benchmark printed (trackers print their own chatter).
        lines = proc.stdout.splitlines()
        first = next((i for i, line in enumerate(lines) if line.startswith("### ")), len(lines))
        text = "\n".join(lines[first:]).strip() + "\n"
        if proc.returncode != 0:
            failed += 1
            text += f"\n**{script} failed (exit {proc.returncode}):**\n\n```\n{proc.stderr[-2000:]}\n```\n"
        print(text)
        print(f"({script}: {time.perf_counter() - started:.0f} s)", file=sys.stderr)
        sections.append(text)
    Path(opts.output).write_text("\n".join(sections))
    print(f"wrote {opts.output} ({time.perf_counter() - total:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
