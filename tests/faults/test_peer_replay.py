"""A finish summary never says drained while a peer's records it tried to replay are missing.

A primary and an actor writer in one process (as a driver with a colocated actor has them): the
actor's delivery process cannot reach the tracker, so the actor finishes with its journal kept;
the primary's own delivery process reaches it. At the primary's finish it replays the actor's
journal, and the tracker is unreachable from there too: the replay fails. The summary must then
say not drained, name the actor's journal and what it lacks, and the journal must stay for
``tracking-core sync`` -- which delivers it once the tracker is reachable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.conftest import Faults, explain_sync, journal_files, once, sync
from tests.helpers.subprocess_python import JOBS

JOB = JOBS / "peer_replay.py"


@pytest.mark.slow
def test_a_primary_that_could_not_replay_a_peer_does_not_say_drained(faults: Faults, tmp_path: Path, jobs) -> None:
    td = tmp_path / "td"
    unreachable = tmp_path / "unreachable"
    unreachable.write_text("down\n")
    job = jobs(JOB, faults.env(), args=[td, unreachable]).wait(90)
    result = job.result
    assert result["actor"]["drained"] is False, result["actor"]["describe"]
    # The primary's own values arrived; the actor's did not.
    assert faults.metrics() == once(["driver/y"], range(100))
    summary = result["summary"]
    assert summary["drained"] is False, summary["describe"]
    assert result["actor_journal"] in summary["describe"], summary["describe"]
    assert "faulty still lacks" in summary["describe"], summary["describe"]
    assert list(result["peers"]) == [result["actor_journal"]]
    assert Path(result["actor_journal"]).is_dir()
    # The run is closed; what the actor lacks is delivered by sync, once.
    done = sync(td, faults.env())
    assert done.returncode == 0, explain_sync(done)
    got = faults.metrics()
    assert got == once(["driver/y", "actor/x"], range(100)), got
    assert journal_files(td) == []
