"""How long the config pipeline takes on slime's real PPO namespace (1391 keys).

Runs the whole pipeline (convert, redact, key) and every backend shape (MLflow params and batches,
W&B config, TensorBoard hparams and text, the JSON artifact) on each namespace of
``tests/fixtures/slime_ppo_args.json``, loaded with realistic objects (enums, dtype-like
objects, dataclasses) as an argparse Namespace, the way slime hands ``args`` over. Prints the
median and 90th percentile per stage and the total against the 20 ms goal, next to what slime
does today (``copy.deepcopy(args.__dict__)``, no conversion, no redaction, no shaping).

    python benchmarks/bench_config.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracking_mlflow.keys import mlflow_params  # noqa: E402
from tracking_tensorboardx.hparams import tensorboard_hparams  # noqa: E402
from tracking_wandb.config import wandb_config  # noqa: E402

from tracking_core.config import build_section, config_json, config_text, redact, to_plain  # noqa: E402

GOAL_MS = 20.0


def _load_namespaces() -> dict[str, argparse.Namespace]:
    """The fixture through the tests' loader (tags turned back into realistic objects)."""
    spec = importlib.util.spec_from_file_location(
        "_config_fixture", ROOT / "tests/config/conftest.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: module.as_namespace(ns) for name, ns in module.load_realistic().items()}


def _time(fn: Callable[[], Any], repeat: int) -> tuple[float, float, float]:
    fn()  # warm caches (key classification, shaped keys), as in a long job's second section
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    p90 = samples[min(len(samples) - 1, int(len(samples) * 0.9))]
    return samples[0], statistics.median(samples), p90


def _all_shapes(args: argparse.Namespace, role: str | None) -> None:
    section = build_section(args, role)
    mlflow_params(section).batches()
    wandb_config(section)
    tensorboard_hparams(section)
    config_text(section)
    config_json(section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    opts = parser.parse_args(argv)
    # The shapes name every key they leave out in a warning; printing those is not what is timed.
    for name in ("tracking_core.config", "tracking_core.mlflow", "tracking_core.backends"):
        logging.getLogger(name).setLevel(logging.ERROR)

    namespaces = _load_namespaces()
    rows: list[tuple[str, str, float, float, float]] = []
    for name, args in namespaces.items():
        role = None if name == "base" else name
        plain, _ = to_plain(args)
        section = build_section(args, role)
        stages: list[tuple[str, Callable[[], Any]]] = [
            ("slime today: deepcopy(args.__dict__)", lambda a=args: copy.deepcopy(vars(a))),
            ("to_plain", lambda a=args: to_plain(a)),
            ("redact", lambda p=plain: redact(p)),
            ("build_section (convert+redact+keys)", lambda a=args, r=role: build_section(a, r)),
            ("mlflow_params + batches", lambda s=section: mlflow_params(s).batches()),
            ("wandb_config", lambda s=section: wandb_config(s)),
            ("tensorboard_hparams", lambda s=section: tensorboard_hparams(s)),
            ("config_text", lambda s=section: config_text(s)),
            ("config_json", lambda s=section: config_json(s)),
            ("TOTAL: pipeline + all shapes", lambda a=args, r=role: _all_shapes(a, r)),
        ]
        for label, fn in stages:
            rows.append((name, label, *_time(fn, opts.repeat)))

    print(
        f"### Config pipeline, slime PPO fixture ({len(vars(namespaces['actor']))} keys), "
        f"{opts.repeat} runs, Python {sys.version.split()[0]}"
    )
    print()
    print(f"`python benchmarks/bench_config.py --repeat {opts.repeat}`")
    print()
    width = max(len(r[1]) for r in rows)
    print(
        f"| namespace | {'stage'.ljust(width)} | min ms | median ms | p90 ms "
        f"| median vs goal {GOAL_MS:.0f} ms |"
    )
    print(f"|---|{'-' * (width + 2)}|---:|---:|---:|---:|")
    for name, label, low, median, p90 in rows:
        ratio = f"{median / GOAL_MS:.2f}x" if label.startswith("TOTAL") else ""
        print(
            f"| {name} | {label.ljust(width)} | {low:6.2f} | {median:9.2f} | {p90:6.2f} "
            f"| {ratio:>21} |"
        )
    totals = [r[3] for r in rows if r[1].startswith("TOTAL")]
    print()
    verdict = "within" if max(totals) <= GOAL_MS else "OVER"
    print(f"worst median total {max(totals):.2f} ms: {verdict} the {GOAL_MS:.0f} ms goal")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"(load average {load:.1f} on {os.cpu_count()} CPUs: timings on a busy machine run high)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
