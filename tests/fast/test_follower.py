"""The follower over a journal under tmp_path: the one completion rule, acknowledgements saved,
left-out backends, a journal whose writer is gone, its lock, and the journal helpers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.fast.fakes import (
    FakeTracker,
    end,
    follower_for,
    journal_with,
    manager_with,
    plan_for,
    rows,
)
from tracking_core.delivery import journal
from tracking_core.delivery.follower import (
    Follower,
    FollowerBusy,
    JournalGone,
    end_of,
    retire,
    spill_of,
    take_over,
)
from tracking_core.delivery.progress import Progress
from tracking_core.records import RunStatus


def test_a_complete_journal_is_removed(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", [*rows(0, 4), end(4)])
    tracker = FakeTracker()
    report = follower_for({"fake": tracker}, folder).finish(4, 5.0)
    assert (report["outstanding"], report["end_n"], report["journal"]) == ({}, 4, str(folder))
    assert report["backends"]["fake"]["delivered"] == 4
    assert not folder.exists()


def test_an_incomplete_journal_stays_with_its_acks(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", [*rows(0, 4), end(4)])
    tracker = FakeTracker()
    tracker.down = True
    report = follower_for({"fake": tracker}, folder).finish(4, 0.5)
    assert report["outstanding"] == {"fake": "records 0..4 (the close included)"}
    assert folder.exists()
    assert journal.read_acks(folder) == {}  # nothing acknowledged: a sync delivers it all


def test_acks_are_saved_as_records_are_delivered(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", rows(0, 3))
    follower = follower_for({"fake": FakeTracker()}, folder)
    assert follower.drain(2, 5.0)
    assert journal.read_acks(folder)["fake"].to_dict() == {"n": 2, "delivered": 3, "rejected": 0, "owed": [], "configs": 0}
    follower.stop()


def test_delivery_resumes_after_what_was_acknowledged(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", [*rows(0, 4), end(4)])
    (folder / journal.ACKS).write_text(json.dumps({"fake": {"n": 1, "delivered": 2}}))
    tracker = FakeTracker()
    report = follower_for({"fake": tracker}, folder).finish(4, 5.0)
    assert [s for _, _, s in tracker.metrics] == [2, 3]
    assert report["backends"]["fake"]["delivered"] == 4


def test_a_backend_left_out_keeps_the_journal(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", [*rows(0, 2), end(2)])
    follower = follower_for({"fake": FakeTracker()}, folder, left_out={"other": "it crashed the delivery process"})
    report = follower.finish(2, 5.0)
    assert report["outstanding"] == {"other": "records 0..2 (the close included) (it crashed the delivery process)"}
    assert report["backends"]["other"]["left_out"] == "it crashed the delivery process"
    assert folder.exists()


def test_a_replay_plan_leaves_the_journal_to_the_sync(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", [*rows(0, 2), end(2)])
    follower = follower_for({"fake": FakeTracker()}, folder, replay=True)
    assert follower.owner is False
    assert follower.finish(2, 5.0)["outstanding"] == {}
    assert folder.exists()


def test_a_second_finish_gets_the_first_report(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", [*rows(0, 1), end(1)])
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker}, folder)
    first = follower.finish(1, 5.0)
    assert follower.finish(1, 5.0) is first
    assert tracker.closed == [RunStatus.FINISHED]


def test_replay_end_journals_the_end_of_a_writer_that_died(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", rows(0, 3))
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker}, folder)
    end_n = follower.replay_end("KILLED")
    assert end_n == 3
    report = follower.finish(end_n, 5.0)
    assert tracker.closed == [RunStatus.KILLED]
    assert report["outstanding"] == {}


def test_replay_end_finds_the_end_the_writer_journaled(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", [*rows(0, 3), end(3, "FAILED")])
    follower = follower_for({"fake": FakeTracker()}, folder)
    assert follower.replay_end() == 3
    follower.stop()


def test_the_journal_is_held_while_it_is_delivered(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", rows(0, 1))
    follower = follower_for({"fake": FakeTracker()}, folder)
    with pytest.raises(FollowerBusy):
        Follower(plan_for(["fake"], folder), manager_with({"fake": FakeTracker()}))
    follower.stop()
    second = Follower(plan_for(["fake"], folder), manager_with({"fake": FakeTracker()}))
    second.stop()


def test_take_over_gets_the_lock_of_a_journal_nobody_delivers(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", rows(0, 1))
    fd = take_over(folder, 0.0)
    assert journal.held(folder / journal.FOLLOWER_LOCK)
    os.close(fd)


def test_take_over_of_a_removed_journal_says_it_is_gone(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", rows(0, 1))
    retire(folder)
    with pytest.raises(JournalGone):
        take_over(folder, 0.0)


def test_take_over_gives_up_at_its_timeout(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", rows(0, 1))
    fd = take_over(folder, 0.0)
    with pytest.raises(FollowerBusy):
        take_over(folder, 0.1)
    os.close(fd)


def test_end_of_appends_an_end_after_the_last_record(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", rows(0, 5))
    assert end_of(folder, "KILLED") == 5
    last, found, _ = journal.scan(folder)
    assert (last, found) == (5, 5)
    assert end_of(folder, "KILLED") == 5  # once


def test_spill_of_reads_the_meta(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", [], meta={"spill": str(tmp_path / "spill")})
    assert spill_of(folder) == tmp_path / "spill"
    assert spill_of(None) is None
    assert spill_of(journal_with(tmp_path / "k", [])) is None


def test_finished_segments_are_collected_while_the_run_goes_on(tmp_path: Path) -> None:
    folder = tmp_path / "j"
    writer = journal.JournalWriter(folder, {"backends": ["fake"]}, 200)
    for line in rows(0, 12):
        writer.append((journal.dumps(line) + "\n").encode())
    writer.close()
    assert len(journal.segments(folder)) > 3
    follower = follower_for({"fake": FakeTracker()}, folder)
    assert follower.drain(11, 5.0)
    follower._collect()
    assert len(journal.segments(folder)) == 1
    follower.stop()


@pytest.mark.parametrize(
    "acks, names, end_n, outstanding",
    [
        ({"a": {"n": 5}}, ["a"], 5, {}),
        ({"a": {"n": 4}}, ["a"], 5, {"a": "records 5..5 (the close included)"}),
        ({"a": {"n": 5, "owed": [2]}}, ["a"], 5, {"a": "1 config section(s)"}),
        ({}, ["a"], None, {"a": "the run's end (not journaled)"}),
        ({"a": {"n": 5}}, ["a", "b"], 5, {"b": "records 0..5 (the close included)"}),
    ],
)
def test_the_completion_rule(acks: dict, names: list[str], end_n: int | None, outstanding: dict[str, str]) -> None:  # type: ignore[type-arg]
    from tracking_core.delivery.progress import BackendProgress

    progress = Progress({k: BackendProgress.from_mapping(v) for k, v in acks.items()}, names)
    assert progress.outstanding(end_n) == outstanding
    assert progress.complete(end_n) is (not outstanding)
