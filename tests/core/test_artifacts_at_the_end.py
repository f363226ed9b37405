"""Artifacts the run's end does not wait for: each is either delivered or counted in the finish
summary as not delivered, and the count is complete when ``finish`` returns."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import tracking_core
from tracking_core.delivery.sync import sync

SMALL = 3


@pytest.fixture
def other_fs(tmp_path: Path) -> Iterator[Path]:
    """A folder on another file system than ``tmp_path``: its files are copied for their
    snapshot (no hard link across file systems)."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as folder:
        if os.stat(folder).st_dev == os.stat(tmp_path).st_dev:
            pytest.skip("/dev/shm is on the same file system as the tests' temporary folder")
        yield Path(folder)


def test_every_artifact_is_delivered_or_counted_when_finish_returns(tmp_path: Path, other_fs: Path) -> None:
    td = tmp_path / "tracking"
    run = tracking_core.start_run(backends=["jsonl"], tracking_dir=td, delivery="thread")
    big = other_fs / "ckpt.bin"
    with open(big, "wb") as fh:  # sparse: 2 GiB to copy (until the end stops it), none in memory
        fh.truncate(2 << 30)
    run.log_artifact(big, name="ckpt")
    for i in range(SMALL):  # queued behind the copy
        (tmp_path / f"note{i}.txt").write_text(str(i))
        run.log_artifact(tmp_path / f"note{i}.txt", name=f"note{i}")
    summary = run.finish(timeout=0.001)  # the end does not wait for the snapshots

    assert summary.abandoned >= SMALL, summary.describe()
    assert f"{summary.abandoned} artifact(s) ended with the run before their snapshot and were NOT delivered" in summary.describe()
    sync(td, stream=None)  # what was journaled is delivered; what was let go of is not
    lines = [json.loads(line) for path in (td / "jsonl").rglob("*.jsonl") for line in path.read_text().splitlines()]
    delivered = [line for line in lines if line.get("type") == "artifact"]
    assert lines, "the run wrote no jsonl"
    assert summary.abandoned + len(delivered) == 1 + SMALL, (summary.abandoned, delivered)
