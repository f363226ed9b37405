"""The core's own costs on the training process: `import tracking_core` in a fresh interpreter
(beside bare Python and the trackers' own imports), the first `start_run` of a fresh process
with MLflow, W&B and TensorBoard selected, and `log_metrics` with a backend that does nothing
(what tracking-core itself adds on the training thread), each beside its floor.

    python benchmarks/bench_core.py [--against REV] [--rounds 9]

``--against REV`` measures the git revision ``REV`` of this repository (extracted to a temporary
directory) side by side with the working tree: the fresh interpreters of both alternate, round
after round, so that both see the same machine.

Every fresh interpreter runs with its bytecode cached (as an installed package has it: a
temporary ``PYTHONPYCACHEPREFIX``, one untimed warm-up run first), whatever
``PYTHONDONTWRITEBYTECODE`` says here. The delivery process is not in the training process's
tree (it is started detached, see ``tracking_core.delivery.client``): it is found by the pid its
run records, and its CPU time and peak memory are read from ``/proc`` before it exits.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

from common import (
    ROOT,
    delivery_pid,
    install_noop_backend,
    median,
    payloads,
    pct,
    per_call,
    process_figures,
    ratio,
    table,
    us,
    wait_gone,
)

CALLS = 5000
IMPORT_GOAL_S = 0.030
START_GOAL_S = 0.050
LOG_GOAL = 1.2
ROUNDS = 9
BACKENDS = ["mlflow", "wandb", "tensorboard"]

# -- what a fresh interpreter runs (``--probe KIND``) ------------------------------------------
def probe_import() -> dict:
    begin = time.perf_counter()
    import tracking_core  # noqa: F401

    return {"import_s": time.perf_counter() - begin}


def probe_start() -> dict:
    """``import tracking_core`` then the first ``start_run`` with the three trackers, timed; the
    run is then finished (MLflow's URI is a port nobody listens on: nothing waits for a server)
    and its delivery process awaited, untimed, so that it does not run into the next probe."""
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    begin = time.perf_counter()
    import tracking_core

    imported = time.perf_counter()
    import logging

    logging.getLogger("tracking_core").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        cpu = time.process_time()
        started = time.perf_counter()
        run = tracking_core.start_run(
            backends=BACKENDS,
            tracking_dir=tmp,
            options={"mlflow_tracking_uri": "http://127.0.0.1:9", "wandb_mode": "offline"},
            export=False,
        )
        took, took_cpu = time.perf_counter() - started, time.process_time() - cpu
        pid = delivery_pid(run, 30)
        time.sleep(0.5)  # what its start cost it (the trackers' imports go on meanwhile)
        figures = process_figures(pid) if pid else {}
        run.finish(timeout=1)
        if pid:
            wait_gone(pid, 60)
    return {"import_s": imported - begin, "start_s": took, "start_cpu_s": took_cpu, "delivery": figures}


def probe_log() -> dict:
    """The floor (dict copy + deque append) and ``log_metrics`` (no-op backend, journal on,
    delivery process), alternately in three rounds of ``CALLS`` calls each."""
    import tracking_core

    data = payloads(CALLS + 100)
    floors, logs = [], []
    with tempfile.TemporaryDirectory() as tmpdir:
        install_noop_backend(Path(tmpdir) / "site")
        run = tracking_core.start_run(backends=["noop"], tracking_dir=Path(tmpdir) / "tc", export=False)
        run.log_metrics({"warmup": 0.0}, step=0, step_key="warmup/step")
        run.flush(60)
        for _ in range(3):
            floor: deque = deque()
            floors.append(pct(per_call(lambda i, floor=floor: floor.append(dict(data[i])), CALLS), 50))
            logs.append(pct(per_call(lambda i: run.log_metrics(data[i], step=i, step_key="train/step"), CALLS), 50))
            run.flush(60)
        run.finish(timeout=60)
    return {"floor_s": median(floors), "log_s": median(logs)}


PROBES = {"import": probe_import, "start": probe_start, "log": probe_log}


# -- fresh interpreters ------------------------------------------------------------------------
class Tree:
    """A source tree whose code fresh interpreters run: the working tree or a git revision."""

    def __init__(self, label: str, root: Path, pycache: Path) -> None:
        self.label, self.root = label, root
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "TRACKING_CORE_RUN")}
        # The tree's own packages first (the plugins are mapped to the checkout's otherwise).
        env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "plugins"), str(ROOT / "benchmarks")])
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
        env["BENCH_TREE"] = str(root)
        self.env = env

    def run(self, code: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *code], capture_output=True, text=True, cwd=self.root, env=self.env,
                              check=True)

    def probe(self, kind: str) -> dict:
        out = self.run([str(ROOT / "benchmarks" / "bench_core.py"), "--probe", kind])
        return json.loads(out.stdout.strip().splitlines()[-1])

    def wall(self, code: str) -> float:
        begin = time.perf_counter()
        self.run(["-c", code])
        return time.perf_counter() - begin


def revision_tree(rev: str, into: Path) -> Path:
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def short(rev: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def side_by_side(trees: list[Tree], rounds: int) -> dict[str, dict[str, list]]:
    """Every measurement of every tree, the trees alternating within each round."""
    got: dict[str, dict[str, list]] = {t.label: {"import": [], "over_bare": [], "start": [], "log": []} for t in trees}
    for tree in trees:  # untimed: the bytecode cache filled, the noop backend's too
        tree.probe("import")
        tree.probe("start")
    for r in range(rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            g = got[tree.label]
            g["import"].append(tree.probe("import")["import_s"])
            bare, imported = tree.wall("pass"), tree.wall("import tracking_core")
            g["over_bare"].append(imported - bare)
            g["start"].append(tree.probe("start"))
        if r < 3:  # the log probe measures 3 x 3 x CALLS calls itself
            for tree in trees if r % 2 == 0 else trees[::-1]:
                got[tree.label]["log"].append(tree.probe("log"))
    return got


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", help="a git revision measured side by side with the working tree")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--probe", choices=sorted(PROBES), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.probe:
        print(json.dumps(PROBES[opts.probe]()))
        return
    command = "python benchmarks/bench_core.py" + (f" --against {opts.against}" if opts.against else "")
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        trees = [Tree("this tree", ROOT, tmp / "pycache")]
        if opts.against:
            label = f"{short(opts.against)} (before)"
            trees.append(Tree(label, revision_tree(opts.against, tmp / "rev"), tmp / "pycache"))
        got = side_by_side(trees, opts.rounds)
        trackers = {}
        for module in ("pluggy", "wandb", "mlflow", "tensorboardX"):
            code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
            try:
                trees[0].run(["-c", code])
                trackers[module] = median([float(trees[0].run(["-c", code]).stdout.split()[-1]) for _ in range(3)])
            except subprocess.CalledProcessError:
                continue
        modes = log_modes(tmp)
    print("\n".join([import_table(trees, got, trackers, command, opts.rounds),
                     start_table(trees, got, command, opts.rounds),
                     log_table(trees, got, modes, command)]))


# -- the tables --------------------------------------------------------------------------------
def goal(value: float, limit: float) -> str:
    return "met" if value <= limit else "NOT met"


def import_table(trees: list[Tree], got: dict, trackers: dict[str, float], command: str, rounds: int) -> str:
    rows = []
    ours = median(got[trees[0].label]["import"])
    for tree in trees:
        g = got[tree.label]
        t, over = median(g["import"]), median(g["over_bare"])
        rows.append([f"`import tracking_core`, {tree.label}", f"{t * 1000:.1f} ms", f"{over * 1000:.1f} ms",
                     ratio(t, ours), f"≤ {IMPORT_GOAL_S * 1000:.0f} ms over bare Python: {goal(over, IMPORT_GOAL_S)}"])
    for module, t in trackers.items():
        rows.append([f"`import {module}`", f"{t * 1000:.1f} ms", "-", ratio(t, ours), ""])
    return table(
        "Import cost",
        command,
        ["what", f"in the interpreter (median of {rounds} fresh ones; 3 for the others)",
         "whole interpreter over bare `python -c pass` (median of paired runs)", "vs tracking-core", "goal"],
        rows,
        "In the interpreter: `time.perf_counter()` around the import statement. Whole interpreter: "
        "`python -c \"import tracking_core\"` less `python -c pass`, run one after the other, the "
        "median of the differences. `import tracking_core` imports only the hook that registers its "
        "Accelerate tracker name; every other module, pluggy's included, loads when first used. The "
        "trackers are imported only in the delivery process, never by the training process.",
    )


def start_table(trees: list[Tree], got: dict, command: str, rounds: int) -> str:
    rows = []
    ours = median([s["start_s"] for s in got[trees[0].label]["start"]])
    for tree in trees:
        starts = got[tree.label]["start"]
        wall = [s["start_s"] for s in starts]
        cpu = [s["start_cpu_s"] for s in starts]
        found = [s["delivery"] for s in starts if s["delivery"]]
        delivery = (
            f"found by pid in {len(found)} of {len(starts)}: {median([f['cpu_s'] for f in found]) * 1000:,.0f} ms "
            f"CPU, {median([f['rss_mib'] for f in found]):.0f} MiB, 0.5 s after start_run returned"
            if found else "not found"
        )
        rows.append([tree.label, f"{median([s['import_s'] for s in starts]) * 1000:.1f} ms",
                     f"{median(wall) * 1000:.1f} ms", f"{pct(wall, 90) * 1000:.1f} ms", f"{median(cpu) * 1000:.1f} ms",
                     ratio(median(wall), ours), f"≤ {START_GOAL_S * 1000:.0f} ms: {goal(median(wall), START_GOAL_S)}",
                     delivery])
    return table(
        "The first `start_run` in a fresh process: MLflow + W&B offline + TensorBoard",
        command,
        ["tree", "`import tracking_core` before it", f"`start_run` p50 ({rounds} processes)", "p90",
         "its CPU time p50", "vs this tree", "goal", "delivery process"],
        rows,
        "What the training process pays before `start_run` returns: the plugins found and loaded "
        "(the trackers' libraries are not: they load in the delivery process), the run's handle, "
        "journal and delivery process started. MLflow's URI is a port nobody listens on (nothing "
        "waits for a server). The delivery process is found by the pid its run records (it is not "
        "in the training process's tree); its CPU time (its children's included) and resident "
        "memory are read from `/proc/<pid>` half a second after `start_run` returned, while it "
        "imports the trackers. Each process then finishes its run and waits for its delivery "
        "process to exit, untimed.",
    )


def log_modes(tmp: Path) -> dict:
    """``log_metrics`` in this process in each delivery mode, beside the floor."""
    install_noop_backend(tmp / "site")
    import tracking_core

    data = payloads(CALLS + 100)
    floor: deque = deque()
    measured = {}
    for label, kwargs in (
        ("journal on, delivery process (the default)", {}),
        ("journal on, delivery on a thread", {"delivery": "thread"}),
        ("journal off, delivery process", {"journal": False}),
    ):
        try:
            run = tracking_core.start_run(backends=["noop"], tracking_dir=tmp / "tc", export=False, **kwargs)
        except TypeError:  # a mode this version of start_run no longer offers
            continue
        run.log_metrics({"warmup": 0.0}, step=0, step_key="warmup/step")
        run.flush(60)
        pid = delivery_pid(run, 30)
        samples = per_call(lambda i, run=run: run.log_metrics(data[i], step=i, step_key="train/step"), CALLS)
        figures = process_figures(pid) if pid else {}
        summary = run.finish(timeout=60)
        delivered = summary.backends["noop"]["delivered"] if summary else 0
        measured[label] = (samples, figures, delivered, summary.logged if summary else 0)
    measured["floor"] = per_call(lambda i: floor.append(dict(data[i])), CALLS)
    return measured


def log_table(trees: list[Tree], got: dict, modes: dict, command: str) -> str:
    copy_put = modes.pop("floor")
    ref = pct(copy_put, 50)
    rows = [["floor: dict copy + deque append", us(ref), us(pct(copy_put, 99)), "1.00x", "-", "-"]]
    for label, (samples, figures, delivered, logged) in modes.items():
        rows.append([
            f"tracking-core `log_metrics`, no-op backend, {label}",
            us(pct(samples, 50)),
            us(pct(samples, 99)),
            ratio(pct(samples, 50), ref),
            f"{delivered:,} of {logged:,}",
            f"pid {figures['pid']}: {figures['cpu_s'] * 1000:,.0f} ms CPU, {figures['rss_mib']:.0f} MiB"
            if figures else "none (delivery on a thread of the training process)",
        ])
    notes = (
        f"{CALLS} calls on the training thread, after a warm-up value has been delivered; the "
        "pump (and, with thread delivery, the follower) run in the background. The no-op "
        "backend is installed as an entry-point distribution, so the delivery process loads it "
        "like any plugin. The delivery process is found by the pid its run records; its CPU time "
        "and resident memory are read from `/proc` after the timed calls."
    )
    if len(trees) > 1 or got[trees[0].label]["log"]:
        side = []
        for tree in trees:
            logs = got[tree.label]["log"]
            floor, log = median([g["floor_s"] for g in logs]), median([g["log_s"] for g in logs])
            side.append(f"{tree.label}: {us(log)} against a floor of {us(floor)}, {log / floor:.2f}x "
                        f"(goal ≤ {LOG_GOAL}x: {goal(log / floor, LOG_GOAL)})")
        notes += (" Side by side, each a fresh process timing the floor and the default mode "
                  f"alternately ({len(got[trees[0].label]['log'])} processes a tree, the median of their "
                  "p50s): " + "; ".join(side) + ".")
    return table(
        "Caller-thread cost of one log call (20 floats), no-op backend",
        command,
        ["layer", "p50", "p99", "p50 vs floor", "values delivered", "delivery process"],
        rows,
        notes,
    )


if __name__ == "__main__":
    main()
