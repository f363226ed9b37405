"""K simulated nodes against one real MLflow server: what the server sees, and how late.

Each node (tests/helpers/nodes.py: its own hostname, tracking directory, working directory and
process tree) runs two writer processes, roles ``actor<k>`` and ``critic<k>``, each logging
``--metrics`` values per step every ``--step-seconds``, plus the node's system sampler (every
``--system-interval`` seconds). node0 also runs the driver, which starts the run; every other
process finds it from the job's run id (``$TRACKING_CORE_RUN_ID``), as a launcher's job id
would give it. One ``mlflow server`` (SQLite store, ``--workers`` uvicorn workers; a fresh store
for each K) is the only thing the nodes share.

Measured over a window of ``--seconds`` once every writer's first values are visible:

* requests/s at the server: access-log lines the server itself wrote in the window (uvicorn's
  access log), split by endpoint;
* values/s delivered: rows added to the store's ``metrics`` table in the window (read from the
  SQLite file, read-only: no request to the server);
* delivery lag: for every step of every writer, the time from the log call (the record's own
  timestamp, which MLflow stores) to the first time the value is seen in the store (polled every
  0.25 s, so up to 0.25 s is the poll's);
* server CPU: user + system CPU of the server's process tree (/proc), as % of one core;
* nodes' CPU: the same for every process of every node (the writers' loops, their delivery
  processes, the samplers), as % of one core.

After the window every writer finishes and the store is read back: each writer's values must be
there exactly once per step (the last column).

    python benchmarks/bench_nodes.py [--nodes 1,2,4] [--seconds 40] [--metrics 50]
        [--step-seconds 1] [--system-interval 10] [--workers 1]

Needs root (one UTS namespace per node, ``unshare --uts``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common import ROOT, cpu_seconds, descendants, pct, table

DRIVER = """
import json, os, sys, time
from pathlib import Path
import tracking_core
stop, report = Path(sys.argv[1]), Path(sys.argv[2])
run = tracking_core.start_run(config={"job": "bench-nodes", "nodes": int(sys.argv[3])})
while not stop.exists():
    time.sleep(0.1)
summary = run.finish(timeout=120)
report.write_text(json.dumps({"summary": summary.describe(), "drained": summary.drained}))
"""

WRITER = """
import json, os, sys, time
from pathlib import Path
import tracking_core
role, metrics, period = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
stop, report = Path(sys.argv[4]), Path(sys.argv[5])
run = tracking_core.attach(role=role, writer=True, config={"lr": 1e-6, "role": role, "seed": 7})
names = [f"train/m{j:02d}" for j in range(metrics)]
step, start = 0, time.monotonic()
while not stop.exists():
    run.log_metrics({n: step * 0.001 + j for j, n in enumerate(names)}, step=step, step_key="train/step")
    step += 1
    time.sleep(max(0.0, start + step * period - time.monotonic()))
summary = run.finish(timeout=120)
report.write_text(json.dumps({"role": role, "steps": step, "summary": summary.describe()}))
"""

IDLE = """
import sys, time
from pathlib import Path
import tracking_core
stop, report = Path(sys.argv[1]), Path(sys.argv[2])
tracking_core.attach(role=sys.argv[3], writer=False)  # not a writer: the node's sampler only
while not stop.exists():
    time.sleep(0.1)
report.write_text("{}")
"""

ACCESS = re.compile(r'"(?:GET|POST|PUT|PATCH|DELETE) (/[^ ?"]*)[^"]* HTTP/[\d.]+" (\d{3})')
PROBE = "train/m00"
SYSTEM_PROBE = "cpu/utilization"


@dataclass
class Lags:
    """First sight of each writer's probe series in the store, polled from the SQLite file."""

    db: Path
    pattern: str
    seen: dict[tuple[str, int], float] = field(default_factory=dict)
    lags: list[tuple[float, float]] = field(default_factory=list)  # (logged at, lag)
    stop: threading.Event = field(default_factory=threading.Event)

    def poll(self) -> None:
        while not self.stop.wait(0.25):
            try:
                rows = query(self.db, f"SELECT key, step, timestamp FROM metrics WHERE key LIKE '{self.pattern}'")
            except sqlite3.Error:
                continue
            now = time.time()
            for key, step, stamp in rows:
                if (key, step) not in self.seen:
                    self.seen[(key, step)] = now
                    self.lags.append((stamp / 1000, now - stamp / 1000))


@dataclass
class Requests:
    """What the nodes send the server, request by request, read from a relay in front of it
    (tests/helpers/nodes.py's Link): each ``log-batch`` classified by its body."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    counts: dict[str, int] = field(default_factory=dict)
    metric_values: int = 0

    def tap(self) -> Callable[[bytes], None]:
        buffer = bytearray()

        def seen(data: bytes) -> None:
            buffer.extend(data)
            while (end := buffer.find(b"\r\n\r\n")) >= 0:
                head = bytes(buffer[:end]).decode("latin-1")
                length = re.search(r"(?im)^content-length:\s*(\d+)", head)
                total = end + 4 + (int(length.group(1)) if length else 0)
                if len(buffer) < total:
                    return
                body = bytes(buffer[end + 4 : total])
                del buffer[:total]
                self.count(head.split(" ", 2)[1], body)

        return seen

    def count(self, path: str, body: bytes) -> None:
        kind, values = path.split("?")[0].removeprefix("/api/2.0/mlflow/"), 0
        if kind.startswith("/api/2.0/mlflow-artifacts/"):
            kind = "artifacts"
        if kind == "runs/log-batch":
            try:
                batch = json.loads(body)
            except ValueError:
                batch = {}
            values = len(batch.get("metrics") or [])
            kind = "metrics" if values else "tags" if batch.get("tags") else "params"
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.metric_values += values

    def snapshot(self) -> tuple[dict[str, int], int]:
        with self.lock:
            return dict(self.counts), self.metric_values


def query(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def server_cpu(pid: int) -> float:
    return sum(cpu_seconds(p) for p in [pid, *descendants(pid)])


def nodes_cpu(nodes: list) -> float:
    return sum(cpu_seconds(p) for node in nodes for p in node.pids())


def access_counts(log: Path, offset: int) -> tuple[dict[str, int], int]:
    with open(log, "rb") as fh:
        fh.seek(offset)
        text = fh.read().decode(errors="replace")
    counts: dict[str, int] = {}
    errors = 0
    for path, status in ACCESS.findall(text):
        name = path.removeprefix("/api/2.0/mlflow/").removeprefix("/ajax-api/2.0/mlflow/")
        counts[name] = counts.get(name, 0) + 1
        errors += not status.startswith("2")
    return counts, errors


def wait_until(what: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.5)


def one(k: int, opts: argparse.Namespace, tmp: Path) -> dict:
    from tests.helpers.mlflow_server import start_server
    from tests.helpers.nodes import Link, SimulatedNode

    server = start_server(tmp / "server", workers=opts.workers)
    requests = Requests()
    link = Link("127.0.0.1", server.port, tap=requests.tap)
    control = tmp / "control"
    control.mkdir()
    stop = control / "stop"
    job = f"bench-nodes-{k}-{time.time_ns():x}"
    env = {
        "PYTHONPATH": f"{ROOT}:{ROOT / 'plugins'}",
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": link.uri,
        "TRACKING_CORE_BACKENDS": "mlflow",
        "TRACKING_CORE_RUN_ID": job,
        "TRACKING_CORE_SYSTEM_METRICS": f"{opts.system_interval:g}",
    }
    if opts.heartbeat is not None:
        env["TRACKING_CORE_WRITER_HEARTBEAT"] = f"{opts.heartbeat:g}"
    nodes = [SimulatedNode(f"node{i}", tmp / "nodes", env=env) for i in range(k)]
    roles = [f"{kind}{i}" for i in range(k) for kind in ("actor", "critic")[: opts.roles_per_node]]
    lags = Lags(server.db_path, f"%/{PROBE}" if roles else f"system/%/{SYSTEM_PROBE}")
    poller = threading.Thread(target=lags.poll, daemon=True)
    try:
        nodes[0].start([sys.executable, "-c", DRIVER, stop, control / "driver.json", k], label="driver")
        for i, node in enumerate(nodes):
            for role in roles[i * opts.roles_per_node : (i + 1) * opts.roles_per_node]:
                node.start(
                    [sys.executable, "-c", WRITER, role, opts.metrics, opts.step_seconds, stop, control / f"{role}.json"],
                    label=role,
                )
            if not roles:
                node.start([sys.executable, "-c", IDLE, stop, control / f"idle{i}.json", f"idle{i}"], label="idle")
        poller.start()
        probes = {f"{role}/{PROBE}" for role in roles} or {f"system/{n.name}/{SYSTEM_PROBE}" for n in nodes}
        try:
            wait_until("every writer's first values in MLflow", lambda: probes <= {key for key, _ in lags.seen}, opts.start_timeout)
        except TimeoutError as exc:
            missing = sorted(probes - {key for key, _ in lags.seen})
            raise TimeoutError(f"{exc}; missing {missing}") from None
        time.sleep(opts.warmup)  # past every process's first open, tags and configs
        run_uuid = query(server.db_path, f"SELECT run_uuid FROM tags WHERE key = 'tracking_core.run_id' AND value = '{job}'")[0][0]

        def values() -> int:
            return int(query(server.db_path, f"SELECT count(*) FROM metrics WHERE run_uuid = '{run_uuid}'")[0][0])

        offset = server.log_path.stat().st_size
        began, cpu0, ncpu0, values0 = time.monotonic(), server_cpu(server.proc.pid), nodes_cpu(nodes), values()
        wall0, sent0, load0 = time.time(), requests.snapshot(), os.getloadavg()[0]
        time.sleep(opts.seconds)
        elapsed = time.monotonic() - began
        cpu1, ncpu1, values1 = server_cpu(server.proc.pid), nodes_cpu(nodes), values()
        wall1, sent1 = time.time(), requests.snapshot()
        counts, errors = access_counts(server.log_path, offset)

        stop.touch()
        reports = [control / f"{name}.json" for name in [*roles, "driver"]]
        wait_until("every writer and the driver finished", lambda: all(r.exists() for r in reports), 300)
        exact = 0
        series = {role: (f"{role}/{PROBE}", json.loads((control / f"{role}.json").read_text())["steps"]) for role in roles}
        for node in nodes if not roles else ():
            series[node.name] = (f"system/{node.name}/{SYSTEM_PROBE}", None)
        for key, steps in series.values():
            count, distinct, first, last = query(
                server.db_path,
                f"SELECT count(*), count(DISTINCT step), min(step), max(step) FROM metrics "
                f"WHERE run_uuid = '{run_uuid}' AND key = '{key}'",
            )[0]
            # a writer's steps: each once, all of them; a sampler's: each once, none missing
            exact += (count, distinct, first) == (steps or count, steps or count, 0) and last == count - 1
        window_lags = [lag for at, lag in lags.lags if wall0 <= at <= wall1 - 5.0]
        samplers = sum(1 for key in query(server.db_path, f"SELECT DISTINCT key FROM metrics WHERE run_uuid = '{run_uuid}' AND key LIKE 'system/%/cpu/utilization'"))
        return {
            "nodes": k,
            "writers": len(roles),
            "series_checked": len(series),
            "samplers": samplers,
            "requests": sum(counts.values()),
            "errors": errors,
            "by_endpoint": counts,
            "by_kind": {k: n - sent0[0].get(k, 0) for k, n in sent1[0].items() if n > sent0[0].get(k, 0)},
            "metric_values_sent": sent1[1] - sent0[1],
            "seconds": elapsed,
            "values": values1 - values0,
            "server_cpu": (cpu1 - cpu0) / elapsed,
            "nodes_cpu": (ncpu1 - ncpu0) / elapsed,
            "lags": window_lags,
            "exact": exact,
            "load": (load0 + os.getloadavg()[0]) / 2,
        }
    finally:
        lags.stop.set()
        stop.touch()
        for node in nodes:
            node.close()
        link.close()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", default="1,2,4", help="K values, comma-separated")
    parser.add_argument("--seconds", type=float, default=40.0, help="the measured window")
    parser.add_argument("--warmup", type=float, default=5.0, help="after every writer's first value")
    parser.add_argument("--metrics", type=int, default=50, help="values per step per writer")
    parser.add_argument("--roles-per-node", type=int, choices=(0, 1, 2), default=2, help="0: samplers only")
    parser.add_argument("--step-seconds", type=float, default=1.0, help="seconds between a writer's steps")
    parser.add_argument("--system-interval", type=float, default=10.0, help="the samplers' interval")
    parser.add_argument("--heartbeat", type=float, default=None, help="$TRACKING_CORE_WRITER_HEARTBEAT (default: unset)")
    parser.add_argument("--workers", type=int, default=1, help="the server's uvicorn workers")
    parser.add_argument("--start-timeout", type=float, default=240.0)
    parser.add_argument("--json", default=None, help="also write the raw figures here")
    parser.add_argument("--keep", default=None, metavar="DIR", help="keep each K's nodes, logs and store under DIR")
    opts = parser.parse_args()
    from tests.helpers.nodes import unshare_available

    if not unshare_available():
        sys.exit("bench_nodes needs root and unshare: each simulated node is a UTS namespace")
    results = []
    for k in (int(x) for x in opts.nodes.split(",")):
        if opts.keep:  # the nodes' directories and logs stay, to be read after
            results.append(one(k, opts, Path(tempfile.mkdtemp(prefix=f"bench-nodes-{k}-", dir=opts.keep))))
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-nodes-{k}-") as tmp:
            results.append(one(k, opts, Path(tmp)))
        print(f"K={k}: {results[-1]['requests'] / results[-1]['seconds']:.2f} requests/s", file=sys.stderr)
    rows = []
    for r in results:
        lags = r["lags"] or [float("nan")]
        per_s = {kind: n / r["seconds"] for kind, n in r["by_kind"].items()}
        batches = r["by_kind"].get("metrics", 0)
        other = sum(v for k, v in per_s.items() if k not in ("metrics", "tags"))
        rate = r["requests"] / r["seconds"]
        rows.append([
            r["nodes"],
            f"{r['writers']} + {r['samplers']} + 1",
            f"{rate:.2f}",
            f"{per_s.get('metrics', 0):.2f} / {per_s.get('tags', 0):.2f} / {other:.2f}",
            f"{r['metric_values_sent'] / batches:.0f}" if batches else "-",
            f"{r['values'] / r['seconds']:,.0f}",
            f"{statistics.median(lags):.2f} / {pct(lags, 95):.2f} / {max(lags):.2f}",
            f"{100 * r['server_cpu']:.1f}%",
            f"{1000 * r['server_cpu'] / rate:.0f} ms" if rate else "-",
            f"{100 * r['nodes_cpu']:.1f}%",
            f"{r['exact']} of {r['series_checked']}",
        ])  # fmt: skip
    loads = ", ".join(f"{r['load']:.1f}" for r in results)
    if opts.roles_per_node:
        roles = " and ".join(("actor<k>", "critic<k>")[: opts.roles_per_node])
        shape = (
            f"Each node: roles {roles}, {opts.metrics} values a step every {opts.step_seconds:g} s "
            f"each, and its system sampler every {opts.system_interval:g} s"
        )
    else:
        shape = (
            f"Each node: its system sampler every {opts.system_interval:g} s, in a process that "
            f"attached as no role's writer; no role writer"
        )
    print(table(
        "K simulated nodes, one MLflow server (SQLite store)",
        "python benchmarks/bench_nodes.py " + " ".join(sys.argv[1:]),
        ["nodes", "writers + samplers + driver", "requests/s at the server",
         "metric batches / registry tags / other (per s)", "values a metric batch",
         "values/s delivered", "lag p50 / p95 / max (s)", "server CPU (one core)",
         "server CPU a request", "nodes' CPU (one core)", "each step once"],
        rows,
        f"{shape}; "
        f"writer heartbeat {'the default' if opts.heartbeat is None else f'{opts.heartbeat:g} s'}; "
        f"node0 also runs the driver. Window {opts.seconds:g} s after every writer's first value "
        f"(+{opts.warmup:g} s); server with {opts.workers} worker(s). Requests/s: the server's "
        f"access log; their kinds: each request's body, read by a relay in front of the server "
        f"(a `log-batch` with metrics, or with tags only: the writer registry); values: rows added "
        f"to the store (each writer also sends its step axis, one value a step); lag: from the log "
        f"call to the value seen in the store (polled every 0.25 s); CPU: /proc. All on one 2-core "
        f"machine: the server, the nodes and this script share it (load average over the "
        f"windows: {loads}).",
    ))  # fmt: skip
    if opts.json:
        Path(opts.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
