"""Run every benchmark and write BENCHMARKS.md with exactly what they print.

    python benchmarks/run_all.py [--quick]

Each benchmark runs in its own interpreter, one after the other (the machine is shared: nothing
else of ours runs meanwhile). `--quick` passes smaller sizes, for a smoke check.
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
    ("bench_core.py", [], []),
    ("bench_config.py", ["--repeat", "50"], ["--repeat", "5"]),
    ("bench_caller.py", [], ["--calls", "300", "--slow-calls", "50"]),
    ("bench_delivery.py", [], ["--rows", "200", "--per-call", "50"]),
    ("bench_loop.py", [], ["--seconds", "2", "--rounds", "1"]),
    ("bench_demo.py", [], []),
]


def versions() -> str:
    out = []
    for dist in ("tracking-core", "torch", "wandb", "mlflow", "tensorboardX", "megatron-core", "accelerate"):
        try:
            out.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(out)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"))
    opts = parser.parse_args()
    header = (
        "# Benchmarks\n\n"
        f"Produced by `python benchmarks/run_all.py` on {time.strftime('%Y-%m-%d')}: "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {versions()}. "
        "Every table below is what the command beside it printed in this one run; the machine "
        "is shared, so absolute times are indicative and the ratios are what to read.\n"
    )
    print(header)
    sections = [header]
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{ROOT}", "WANDB_SILENT": "true"}
    failed = 0
    for script, full, quick in BENCHMARKS:
        args = quick if opts.quick else full
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
        sections.append(text)
    Path(opts.output).write_text("\n".join(sections))
    print(f"wrote {opts.output}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
