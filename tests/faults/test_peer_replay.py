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

JOB = """
import sys, tracking_core
td, unreachable = sys.argv[1], sys.argv[2]
run = tracking_core.start_run(backends=["faulty"], tracking_dir=td)
# From here on the tracker is unreachable from this process and the processes it starts: the
# primary's delivery process, started above, still reaches it.
_os.environ["FAULT_DOWN_FILE"] = unreachable
actor = tracking_core.attach(role="actor", writer=True, collect=False)
for step in range(100):
    actor.log_metrics({"x": float(step)}, step=step)  # reaches trackers as actor/x
    run.log_metrics({"driver/y": float(step)}, step=step)
actor_summary = actor.finish(timeout=3)
summary = run.finish(timeout=20)
report(actor=summ(actor_summary), summary=summ(summary), peers=getattr(summary, "peers", None),
       actor_journal=str(actor.journal))
"""


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
