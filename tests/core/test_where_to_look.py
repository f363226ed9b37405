"""What the end of a job says about W&B offline runs: every node's directories, not only this one's."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tracking_core.handle import RunHandle
from tracking_core.viewers import where_to_look


def test_wandb_offline_lines_cover_every_node(tmp_path: Path) -> None:
    handle = RunHandle(
        run_id="r1",
        name="r1",
        tracking_dir=str(tmp_path / "node0"),
        host="node0",
        backends={"wandb": {"mode": "offline", "id": "abc123", "dir": str(tmp_path / "node0")}},
    )
    lines = where_to_look(handle)
    head, other = lines[0], lines[1]
    assert head.startswith("W&B offline run abc123: upload it with ") and head.endswith("(on node0)")
    assert f"{tmp_path / 'node0'}/wandb/offline-run-*-abc123*" in head
    assert "every other node that ran a writer" in other
    command = other.split(": ", 1)[1]
    assert command.endswith("sync $TRACKING_CORE_DIR/wandb/offline-run-*-abc123*"), command
    # runnable as printed on another node: the variable names that node's directory
    node1 = tmp_path / "node1"
    run_dir = node1 / "wandb" / "offline-run-20261203_000000-abc123"
    run_dir.mkdir(parents=True)
    shown = subprocess.run(
        ["bash", "-c", f"echo {command.split(' sync ', 1)[1]}"],
        env={"TRACKING_CORE_DIR": str(node1), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip() == str(run_dir)


def test_swanlab_offline_lines_say_which_sync_command_to_follow(tmp_path: Path) -> None:
    """SwanLab's own banner prints ``swanlab sync <dir>`` without ``--id``; the closing lines give
    one command per writer, each with ``--id``, and say that those are the ones to run."""
    log_dir = tmp_path / "swanlog"
    for label in ("actor-r0-p1", "primary-p0"):
        (log_dir / f"run-20261203_000000-r1-{label}").mkdir(parents=True)
    handle = RunHandle(
        run_id="r1",
        name="r1",
        tracking_dir=str(tmp_path),
        backends={"swanlab": {"mode": "offline", "id": "r1", "log_dir": str(log_dir)}},
    )
    head, *commands, note = where_to_look(handle)
    assert head == f"SwanLab offline run r1 in {log_dir}: upload it with"
    assert len(commands) == 2 and all(" sync --id r1 " in c for c in commands), commands
    assert commands[-1].endswith("-r1-primary-p0")  # the primary's last
    assert "banner" in note and "`swanlab sync <dir>`" in note and "without --id" in note
    assert "use the commands here, with --id" in note and "not duplicated" in note
