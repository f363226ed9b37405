"""What the user reads about an ending says it plainly: which tracker, which call, which process,
and never a status the run did not end with. The texts are the real ones, from real processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.conftest import make_dist
from tests.helpers.subprocess_python import JOBS, run_python

# A tracker whose constructor aborts its process ($STUCK=abort) or never returns ($STUCK=hang).
STUCK = (JOBS / "plain_texts_stuck.py").read_text(encoding="utf-8")

GARBLED = re.compile(r"its its|'s its|''s")


def test_a_writers_end_line_never_says_the_run_finished(tmp_path: Path) -> None:
    """A writer that finished its part of a run that failed (the demo's node sampler, a role):
    its line names the writer, and only the primary's says how the run ended."""
    out = run_python(
        JOBS / "plain_texts_writer_end.py",
        args=[tmp_path],
    )
    label = out.stdout.strip()
    assert f"tracking-core writer {label} finished; jsonl: 1 of 1 values delivered" in out.stderr, out.stderr
    assert "run FINISHED" not in out.stderr, out.stderr
    assert "run FAILED" in out.stderr, out.stderr


@pytest.mark.slow
def test_a_tracker_whose_constructor_aborts_or_hangs_is_named_plainly(site: Path, tmp_path: Path) -> None:
    make_dist(site, "stuck-tracking", {"stuck": "stuck_plugin"}, {"stuck_plugin": STUCK})
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    # Live: the delivery process dies in the constructor three times; the tracker is left out.
    out = run_python(
        JOBS / "plain_texts_stuck_run.py",
        args=[tmp_path],
        env={"PYTHONPATH": path, "STUCK": "abort"},
    )
    said = out.stdout + out.stderr
    assert not GARBLED.search(said), said
    assert (
        "delivery process for the driver (primary-p" in out.stderr
        and "ended (SIGABRT, tracker 'stuck' in its constructor call); starting it again (1 of 3 for tracker 'stuck')"
        in out.stderr
    ), out.stderr
    assert "left out of delivery: its client ended the delivery process 3 times (SIGABRT in its constructor call)" in out.stdout
    # sync: the same tracker, each in a process of its own.
    for mode, why in (
        ("abort", "its client ended the process delivering it (SIGABRT in its constructor call)"),
        ("hang", "its constructor call had not returned after 3 s"),
    ):
        sync = subprocess.run(
            [sys.executable, "-m", "tracking_core.cli", "sync", "--timeout", "3", str(tmp_path)],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": path, "STUCK": mode},
        )  # fmt: skip
        assert sync.returncode == 1, sync.stderr
        assert why in sync.stderr and not GARBLED.search(sync.stderr), sync.stderr
