"""Reading a jsonl run back: configs per role, metric series and the other kinds of records
(tables, histograms, texts, artifacts) by name (``tracking-core show``)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracking_core.names import path_part


@dataclass
class JsonlRun:
    path: Path
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    status: str | None = None
    files: list[str] = field(default_factory=list)
    #: ``(kind, name)`` -> records: ``("table", "actor/rollout/samples")``
    records: Counter[tuple[str, str]] = field(default_factory=Counter)

    def metric_counts(self) -> Counter[str]:
        return Counter(m["name"] for m in self.metrics)


def find_run(run: str, tracking_dir: str) -> Path:
    """``run`` as a run directory, or a run id (or unique prefix) under the tracking directory."""
    path = Path(run)
    if path.is_dir() and any(path.glob("*.jsonl")):
        return path
    base = Path(tracking_dir) / "jsonl"
    exact = base / path_part(run, warn=False)
    if exact.is_dir():
        return exact
    matches = sorted(p for p in base.glob(f"{run}*") if p.is_dir()) if base.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    known = sorted(p.name for p in base.iterdir()) if base.is_dir() else []
    hint = f"runs under {base}: {', '.join(known[-10:])}" if known else f"no jsonl runs under {base}"
    if len(matches) > 1:
        raise FileNotFoundError(f"run {run!r} is ambiguous ({len(matches)} matches); {hint}")
    raise FileNotFoundError(f"no jsonl run {run!r} (a run directory or run id); {hint}")


def read_run(path: Path) -> JsonlRun:
    out = JsonlRun(path)
    for file in sorted(path.glob("*.jsonl")):
        out.files.append(file.name)
        with file.open() as fh:
            for line in fh:
                if not line.strip():
                    continue
                obj = json.loads(line)
                kind = obj.get("type")
                if kind == "config":
                    out.configs[obj["namespace"]] = obj
                elif kind == "metric":
                    out.metrics.append(obj)
                elif kind == "status":
                    out.status = obj["status"]
                elif kind in ("table", "histogram", "text", "artifact"):
                    out.records[(kind, str(obj.get("name")))] += 1
    return out
