"""The job's roll as a finishing primary's delivery uses it (tracking_core.attendance), in process.

The roll is what :func:`~tracking_core.attendance.take_roll` keeps from the job's c10d store (the
torchrun tests announce and read it for real); ``read`` stands for a tracker's writer registry.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tracking_core.attendance import ROLL_FILE, await_writers, unwritten_roles
from tracking_core.delivery.writers import owing_text
from tracking_core.handle import run_folder

RUN = "run-1"
CRITIC = {
    "role": "critic",
    "rank": 1,
    "writer": True,
    "host": "node1",
    "label": "critic-r1-p42",
    "tracking_dir": "/nodes/node1/tracking",
}


def _keep(tracking_dir: Path, roll: list[dict[str, Any]]) -> None:
    folder = run_folder(tracking_dir, RUN)
    folder.mkdir(parents=True)
    (folder / ROLL_FILE).write_text(json.dumps(roll))


def _await(
    tracking_dir: Path, read: Callable[[], Mapping[str, Mapping[str, Any]] | None], wait: float
) -> tuple[dict[str, dict[str, Any]], float]:
    started = time.monotonic()
    owing = await_writers(
        read,
        run_id=RUN,
        own="primary-p1",
        tracking_dir=tracking_dir,
        since=time.time(),
        until=time.monotonic() + wait,
        stop=threading.Event(),
    )
    return owing, time.monotonic() - started


def test_an_announced_writer_the_registry_never_hears_of_is_owing(tmp_path: Path) -> None:
    _keep(tmp_path, [CRITIC, {**CRITIC, "rank": 2, "writer": False, "label": None}])
    owing, took = _await(tmp_path, dict, 1.5)
    assert list(owing) == ["critic-r1-p42"] and took >= 1.4  # waited for it to the bound
    text = owing_text(owing["critic-r1-p42"])
    assert text.startswith("critic rank 1 on host node1 (critic-r1-p42) attached and never reached")
    assert text.endswith("run on node1: " + owing["critic-r1-p42"]["sync"])
    assert "sync /nodes/node1/tracking" in text


def test_an_announced_writer_that_reaches_the_registry_is_judged_there(tmp_path: Path) -> None:
    _keep(tmp_path, [CRITIC])
    reads = []

    def read() -> dict[str, dict[str, Any]]:
        reads.append(1)
        return {} if len(reads) < 3 else {CRITIC["label"]: {**CRITIC, "state": "complete"}}

    owing, took = _await(tmp_path, read, 20.0)
    assert owing == {} and took < 10.0  # not the bound: it came, complete


def test_no_roll_or_an_unreadable_registry_names_no_announced_writer(tmp_path: Path) -> None:
    assert _await(tmp_path, dict, 0.2)[0] == {}  # no roll kept: the registry alone
    _keep(tmp_path, [CRITIC])
    assert _await(tmp_path, lambda: None, 0.2)[0] == {}  # it cannot say whom it lacks


def test_a_writer_of_this_host_and_directory_is_left_to_the_finish(tmp_path: Path) -> None:
    import socket

    here = {**CRITIC, "host": socket.gethostname(), "tracking_dir": str(tmp_path)}
    _keep(tmp_path, [here, {**CRITIC, "label": "primary-p1"}])  # and the primary itself
    assert _await(tmp_path, dict, 0.2)[0] == {}


def test_roles_whose_processes_attached_with_no_writer() -> None:
    roll = [
        {"role": "actor", "rank": 0, "writer": True, "host": "h0"},
        {"role": "actor", "rank": 1, "writer": False, "host": "h0"},
        {"role": "critic", "rank": 2, "writer": False, "host": "h1"},
        {"role": "critic", "rank": 3, "writer": False, "host": "h1"},
        {"role": "critic", "rank": 4, "writer": False, "host": "h2"},
    ]
    lines = unwritten_roles(roll)
    assert list(lines) == ["critic"]
    assert lines["critic"].startswith(
        "role critic: 3 process(es) attached (ranks 2-4 on h1, h2), none of them its writer"
    )
    assert "attach(role='critic', group=...)" in lines["critic"]
