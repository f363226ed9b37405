"""The jsonl backend instance: appends one JSON object per line, one file per role; artifacts
are copied under the run directory, into the folder ``artifacts/<role>/<name>/`` (a file keeps
its own name there; a directory's files are its contents). The run id, the role and the
artifact's name are file names here, made safe by :mod:`tracking_core.names` (a name such as
``../../x`` stays a name inside the run directory); the lines hold every name as logged."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracking_core.names import path_part, path_under
from tracking_core.plugin_api import (
    ArtifactRecord,
    ConfigSection,
    HistogramRecord,
    MetricRecord,
    RunContext,
    RunStatus,
    TableRecord,
    TextRecord,
    hookimpl,
)

PRIMARY_FILE = "primary"


def run_dir(tracking_dir: str | os.PathLike[str], run_id: str) -> Path:
    return Path(tracking_dir) / "jsonl" / path_part(run_id, "run id")


def target(run: RunContext) -> dict[str, str]:
    """``{"dir": ...}``: the run's directory, absolute, so that every process (and ``sync`` from
    any working directory) writes the same files."""
    return {"dir": str(run_dir(run.tracking_dir, run.run_id).absolute())}


class JsonlBackend:
    def __init__(self, run: RunContext) -> None:
        self.dir = run_dir(run.tracking_dir, run.run_id)
        self.file = f"{_role_part(run.role)}.jsonl"
        self._fd: int | None = None

    def _write(self, objs: Sequence[Mapping[str, Any]]) -> None:
        if self._fd is not None and os.fstat(self._fd).st_nlink == 0:
            os.close(self._fd)  # deleted under the run (a cleaner): go on in a new file there
            self._fd = None
        if self._fd is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.dir / self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        data = "".join(json.dumps(o, sort_keys=True, default=str) + "\n" for o in objs)
        # One write per batch with O_APPEND: concurrent writers never interleave inside a line.
        os.write(self._fd, data.encode())

    @hookimpl
    def open_run(self, run: RunContext, target: Mapping[str, Any] | None) -> dict[str, Any]:
        if target and target.get("dir"):
            self.dir = Path(target["dir"])
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = {"run_id": run.run_id, "name": run.name, "created": time.time(), "tags": dict(run.tags)}
        (self.dir / "run.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        self._write([{"type": "open", "ts": time.time(), "label": run.label}])
        return {"dir": str(self.dir)}

    @hookimpl
    def attach_run(self, run: RunContext, attach: Mapping[str, Any]) -> None:
        if attach.get("dir"):
            self.dir = Path(attach["dir"])
        self._write([{"type": "attach", "ts": time.time(), "label": run.label, "role": run.role}])

    @hookimpl
    def log_config(self, config: ConfigSection, role: str | None) -> None:
        self._write(
            [
                {
                    "type": "config",
                    "role": role,
                    "namespace": config.namespace,
                    "prefix": config.prefix,
                    "params": dict(config.params),
                    "values": dict(config.values),
                    "report": dict(config.report),
                }
            ]
        )

    @hookimpl
    def log_metrics(self, records: Sequence[MetricRecord]) -> None:
        self._write(
            [
                {
                    "type": "metric",
                    "name": r.name,
                    "key": r.key,
                    "role": r.role,
                    "value": r.value,
                    "step": r.step,
                    "step_key": r.axis,
                    "ts": r.timestamp,
                    "seq": r.seq,
                }
                for r in records
            ]
        )

    @hookimpl
    def log_table(self, table: TableRecord) -> None:
        self._write([{**_common(table), "type": "table", "columns": list(table.columns), "rows": [list(r) for r in table.rows]}])

    @hookimpl
    def log_histogram(self, histogram: HistogramRecord) -> None:
        h = histogram
        self._write(
            [
                {
                    **_common(h),
                    "type": "histogram",
                    "counts": list(h.counts),
                    "edges": list(h.edges),
                    "count": h.count,
                    "min": h.min,
                    "max": h.max,
                    "sum": h.sum,
                    "sum_squares": h.sum_squares,
                    "percentiles": dict(h.percentiles),
                    "non_finite": h.non_finite,
                }
            ]
        )

    @hookimpl
    def log_text(self, text: TextRecord) -> None:
        self._write([{**_common(text), "type": "text", "text": text.text}])

    @hookimpl
    def log_artifact(self, artifact: ArtifactRecord, run: RunContext) -> None:
        folder = self.dir / "artifacts" / _role_part(run.role) / path_under(artifact.key, "artifact name")
        if artifact.is_dir:
            dest = folder
            shutil.copytree(artifact.path, dest, dirs_exist_ok=True, copy_function=_link_or_copy)
        else:
            dest = folder / (artifact.files[0][0] if artifact.files else os.path.basename(artifact.path))
            folder.mkdir(parents=True, exist_ok=True)
            _link_or_copy(artifact.path, str(dest))
        self._write(
            [
                {
                    "type": "artifact",
                    "name": artifact.name,
                    "key": artifact.key,
                    "kind": artifact.kind,
                    "role": artifact.role,
                    "path": str(dest),
                    "source": artifact.source,
                    "size": artifact.size,
                    "files": [list(f) for f in artifact.files],
                    "ts": artifact.timestamp,
                    "seq": artifact.seq,
                }
            ]
        )

    @hookimpl
    def close_run(self, status: RunStatus, run: RunContext) -> None:
        if run.primary:
            self._write([{"type": "status", "status": status.value, "ts": time.time()}])
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _role_part(role: str | None) -> str:
    return PRIMARY_FILE if role is None else path_part(role, "role")


def _common(record: TableRecord | HistogramRecord | TextRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "key": record.key,
        "role": record.role,
        "step": record.step,
        "step_key": record.axis,
        "ts": record.timestamp,
        "seq": record.seq,
    }


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link where the file system allows (the snapshot is never written to), else a copy."""
    if os.path.lexists(dst):
        os.unlink(dst)  # delivered again (a retry, a sync): the same bytes
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
