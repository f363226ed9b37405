"""Reading W&B offline runs back with W&B's own reader, and grepping what W&B wrote.

wandb 0.31 ships no Python reader for its ``.wandb`` transaction log; its reader is the
``wandb leet inspect`` command (the ``wandb-core`` binary underneath):

* ``wandb leet inspect --json RUN.wandb``: one JSON object per record (``run``, ``config``,
  ``history``, ``summary``, ``metric``, ``files``, ``environment``, ``exit``, ...);
* ``wandb leet inspect --summary --json RUN.wandb``: the run as W&B folds it (config, summary,
  state, exit code).

Both are run for every run directory, concurrently (each costs an interpreter start). A logged
``1.0`` reads back as ``1``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INSPECT_TIMEOUT = 120.0


@dataclass
class OfflineRun:
    """One offline run directory as W&B reads it."""

    path: Path
    run_id: str
    config: dict[str, Any]
    summary: dict[str, Any]
    state: str | None
    exit_code: int | None
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def history(self) -> list[dict[str, Any]]:
        """Every history row's items, in order (``_step``, ``_timestamp``, ``_runtime`` too)."""
        return [r["history"].get("item", {}) for r in self.records if r.get("type") == "history"]

    @property
    def metric_definitions(self) -> dict[str, dict[str, Any]]:
        """``define_metric`` records by metric name (``step_metric`` names the axis)."""
        return {
            r["metric"]["name"]: r["metric"]
            for r in self.records
            if r.get("type") == "metric" and r["metric"].get("name")
        }

    @property
    def environment(self) -> list[dict[str, Any]]:
        """The environment records (W&B's run metadata: args, program, host, ...)."""
        return [r["environment"] for r in self.records if r.get("type") == "environment"]

    @property
    def files(self) -> list[str]:
        """Paths published with ``files`` records (``run.save``), relative to the files dir."""
        out: list[str] = []
        for r in self.records:
            if r.get("type") == "files":
                out.extend(f["path"] for f in r["files"].get("files", []))
        return out

    @property
    def suffix(self) -> str:
        """What follows the run id in the directory name (the writer's label, W&B's ``-1``
        for a second directory of one id, or ``""``)."""
        _, sep, rest = self.path.name.partition(f"-{self.run_id}-")
        return rest if sep else ""


def wandb_command() -> list[str]:
    """The ``wandb`` CLI of the interpreter running the tests."""
    script = Path(sys.executable).with_name("wandb")
    return [str(script)] if script.exists() else [sys.executable, "-m", "wandb"]


def _inspect(run_file: Path, *extra: str) -> str:
    env = dict(os.environ)
    env.setdefault("WANDB_SILENT", "true")
    # Reading needs no network: keep the CLI from reporting its own telemetry.
    env["WANDB_MODE"] = "offline"
    env["WANDB_ERROR_REPORTING"] = "false"
    proc = subprocess.run(
        [*wandb_command(), "leet", "inspect", "--json", *extra, str(run_file)],
        capture_output=True,
        text=True,
        env=env,
        timeout=INSPECT_TIMEOUT,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"`wandb leet inspect --json {' '.join(extra)} {run_file}` failed "
            f"({proc.returncode}): {proc.stderr.strip()[-2000:]}"
        )
    return proc.stdout


def _json(text: str, run_file: Path) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise AssertionError(
            f"W&B's reader printed something that is not JSON for {run_file}: {text[:500]!r}"
        ) from exc


def run_file_of(run_dir: Path) -> Path:
    files = sorted(run_dir.glob("run-*.wandb"))
    if len(files) != 1:
        raise FileNotFoundError(f"expected one run-*.wandb in {run_dir}, found {files}")
    return files[0]


def read_offline_run(run_dir: str | os.PathLike[str]) -> OfflineRun:
    """Read one offline run directory (``.../offline-run-<time>-<id>[-<suffix>]``)."""
    return read_offline_runs([Path(run_dir)])[0]


def read_offline_runs(run_dirs: Iterable[str | os.PathLike[str]]) -> list[OfflineRun]:
    """Read several run directories, running W&B's reader for all of them at once."""
    dirs = [Path(d) for d in run_dirs]
    files = [run_file_of(d) for d in dirs]
    with ThreadPoolExecutor(max_workers=max(1, 2 * len(files))) as pool:
        records = [pool.submit(_inspect, f) for f in files]
        summaries = [pool.submit(_inspect, f, "--summary") for f in files]
        out = []
        for d, f, rec, summ in zip(dirs, files, records, summaries, strict=True):
            lines = [_json(line, f) for line in rec.result().splitlines() if line.strip()]
            summary = _json(summ.result(), f)
            out.append(
                OfflineRun(
                    path=d,
                    run_id=str(summary.get("run_id") or f.stem.removeprefix("run-")),
                    config=dict(summary.get("config") or {}),
                    summary=dict(summary.get("summary") or {}),
                    state=summary.get("state"),
                    exit_code=summary.get("exit_code"),
                    records=lines,
                )
            )
    return out


def find_offline_runs(wandb_dir: str | os.PathLike[str], run_id: str | None = None) -> list[Path]:
    """Offline run directories under ``wandb_dir`` (the directory given to ``wandb.init(dir=)``
    or its ``wandb/`` subdirectory), optionally only those of ``run_id``, oldest first."""
    base = Path(wandb_dir)
    if (base / "wandb").is_dir():
        base = base / "wandb"
    dirs = sorted(p for p in base.glob("offline-run-*") if p.is_dir() and not p.is_symlink())
    if run_id is not None:
        dirs = [p for p in dirs if (p / f"run-{run_id}.wandb").exists()]
    return dirs


def read_job(wandb_dir: str | os.PathLike[str], run_id: str) -> list[OfflineRun]:
    """Every offline directory of one run id: what ``wandb sync`` would merge into one run."""
    dirs = find_offline_runs(wandb_dir, run_id)
    if not dirs:
        raise FileNotFoundError(f"no offline W&B run {run_id!r} under {wandb_dir}")
    return read_offline_runs(dirs)


def merged_config(runs: Sequence[OfflineRun]) -> dict[str, Any]:
    """The union of the runs' configs (W&B's ``_wandb`` bookkeeping left out); a key two
    directories disagree on raises, naming both."""
    out: dict[str, Any] = {}
    where: dict[str, Path] = {}
    for run in runs:
        for key, value in run.config.items():
            if key == "_wandb":
                continue
            if key in out and out[key] != value:
                raise AssertionError(
                    f"config key {key!r} is {out[key]!r} in {where[key]} but {value!r} in {run.path}"
                )
            out[key] = value
            where[key] = run.path
    return out


def grep_files(root: str | os.PathLike[str], needle: str | bytes) -> list[Path]:
    """Every regular file under ``root`` whose bytes contain ``needle`` (symlinks not followed,
    so each file is read once). For planted-secret checks: an empty list is a pass."""
    data = needle.encode() if isinstance(needle, str) else needle
    hits: list[Path] = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            try:
                if data in path.read_bytes():
                    hits.append(path)
            except OSError:
                continue
    return hits


def count_files(root: str | os.PathLike[str]) -> int:
    """How many regular files ``root`` holds (to show a grep had something to search)."""
    return sum(
        1
        for dirpath, _dirs, names in os.walk(root)
        for name in names
        if (Path(dirpath) / name).is_file() and not (Path(dirpath) / name).is_symlink()
    )


# -- a quiet offline environment for tests --------------------------------------------------
W_VARS = (
    "WANDB_API_KEY",
    "WANDB_SERVICE",
    "WANDB_PROJECT",
    "WANDB_ENTITY",
    "WANDB_RUN_GROUP",
    "WANDB_NAME",
    "WANDB_BASE_URL",
    "WANDB_CONSOLE",
    "WANDB_RUN_ID",
    "WANDB_RESUME",
    "TRACKING_CORE_RUN",
    "TRACKING_CORE_BACKENDS",
    "TRACKING_CORE_DIR",
)


def offline_env(tmp: Path) -> dict[str, str]:
    """W&B offline, quiet, and writing only under ``tmp`` (its cache, config and data dirs too),
    so that "every file W&B wrote" is every file under ``tmp``."""
    env = {
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DIR": str(tmp / "wandb-root"),
        "WANDB_CACHE_DIR": str(tmp / "wandb-cache"),
        "WANDB_CONFIG_DIR": str(tmp / "wandb-config"),
        "WANDB_DATA_DIR": str(tmp / "wandb-data"),
        "WANDB_ARTIFACT_DIR": str(tmp / "wandb-artifacts"),
        "NETRC": str(tmp / "no-netrc"),
    }
    for path in ("wandb-root", "wandb-cache", "wandb-config", "wandb-data"):
        (tmp / path).mkdir(parents=True, exist_ok=True)
    return env
