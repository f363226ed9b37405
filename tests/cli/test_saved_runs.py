"""Naming a saved run: a directory, its handle.json, a run id, a unique prefix, or the latest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tracking_core import cli
from tracking_core.errors import TrackingError
from tracking_core.handle import RunHandle
from tracking_core.saved_runs import RunNotFound, find_saved_run


def _save(tracking_dir: Path, run_id: str, mtime: float) -> RunHandle:
    handle = RunHandle(run_id=run_id, name=run_id, tracking_dir=str(tracking_dir))
    path = handle.save()
    os.utime(path, (mtime, mtime))
    return handle


def test_every_way_of_naming_a_run(tmp_path: Path) -> None:
    old = _save(tmp_path, "20261201-100000-aaaaaa", 1_000)
    new = _save(tmp_path, "20261201-110000-bbbbbb", 2_000)
    assert find_saved_run(None, tmp_path).run_id == new.run_id  # the latest
    assert find_saved_run(str(old.run_dir), tmp_path).run_id == old.run_id
    assert find_saved_run(str(old.run_dir / "handle.json"), "/elsewhere").run_id == old.run_id
    assert find_saved_run(old.run_id, tmp_path).run_id == old.run_id
    assert find_saved_run("20261201-10", tmp_path).run_id == old.run_id
    with pytest.raises(RunNotFound, match="ambiguous: 20261201-100000-aaaaaa, 20261201-110000-bbbbbb match"):
        find_saved_run("20261201", tmp_path)
    with pytest.raises(RunNotFound, match=f"runs under {tmp_path / 'runs'}: 20261201-100000-aaaaaa, "):
        find_saved_run("nope", tmp_path)


def test_a_damaged_handle_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "runs" / "r1" / "handle.json").write_text("{cut")
    with pytest.raises(TrackingError, match="r1: malformed tracking-core run handle"):
        find_saved_run("r1", tmp_path)
    assert cli.main(["ui", "r1", "--tracking-dir", str(tmp_path), "--dry-run"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"tracking-core ui: {tmp_path / 'runs' / 'r1'}: malformed")
