"""The job's writer registry: what a writer publishes and when (seq, behind, heartbeats), and how
a finishing primary judges the others (Seen, judge, silent, await_writers), on a fake clock."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.fast.fakes import FakeClock, FakeEvent
from tracking_core.delivery import writers
from tracking_core.delivery.writers import (
    COMPLETE,
    INCOMPLETE,
    SETTLE,
    SPACING,
    UNHEARD,
    WRITING,
    Counts,
    Publisher,
    Seen,
    await_writers,
    caught_up,
    handled_here,
    identity,
    judge,
    owing_entry,
    owing_text,
    silent,
)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    clock = FakeClock()
    monkeypatch.setattr(writers, "time", clock)
    return clock


def publisher(live: bool = True, beat: float = 0.0, monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[Publisher, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    p = Publisher({"label": "actor-r0"}, lambda state: sent.append(state) or True, live=live)
    p.beat = beat
    return p, sent


# -- a writer's side ---------------------------------------------------------------------------
def test_the_first_publication_says_it_writes(clock: FakeClock) -> None:
    p, sent = publisher()
    p.opened(Counts(0, 0, 0, clock.now))
    assert [(s["state"], s["seq"], s["label"]) for s in sent] == [(WRITING, 1, "actor-r0")]


def test_publications_are_numbered_in_order(clock: FakeClock) -> None:
    p, sent = publisher()
    p.opened(Counts(0, 0, 0, clock.now))
    p.closed(Counts(5, 5, 0, clock.now), complete=True)
    assert [s["seq"] for s in sent] == [1, 2]
    assert p.seq == 2


def test_behind_is_how_long_before_the_publication_everything_was_delivered(clock: FakeClock) -> None:
    p, sent = publisher()
    p.opened(Counts(10, 8, 0, clock.now - 4.25))
    assert sent[0]["behind"] == 4.25
    assert sent[0]["at"] == clock.now


def test_behind_is_never_negative(clock: FakeClock) -> None:
    p, sent = publisher()
    p.opened(Counts(1, 1, 0, clock.now + 3))
    assert sent[0]["behind"] == 0.0


def test_the_counts_are_published(clock: FakeClock) -> None:
    p, sent = publisher()
    p.opened(Counts(10, 7, 2, clock.now))
    assert (sent[0]["journaled"], sent[0]["delivered"], sent[0]["rejected"]) == (10, 7, 2)


def test_a_replay_publishes_only_its_final_state(clock: FakeClock) -> None:
    p, sent = publisher(live=False)
    p.opened(Counts(0, 0, 0, clock.now))
    p.tick(Counts(1, 1, 0, clock.now), caught_up=True)
    p.closed(Counts(3, 3, 0, clock.now), complete=True)
    assert [s["state"] for s in sent] == [COMPLETE]
    assert sent[0]["beat"] == 0.0


@pytest.mark.parametrize("complete, state", [(True, COMPLETE), (False, INCOMPLETE)])
def test_the_close_says_complete_or_not(clock: FakeClock, complete: bool, state: str) -> None:
    p, sent = publisher()
    p.closed(Counts(3, 2, 0, clock.now), complete=complete, intended_status="FINISHED")
    assert sent[-1]["state"] == state
    assert sent[-1]["intended_status"] == "FINISHED"
    assert p.final


def test_nothing_is_published_after_the_close(clock: FakeClock) -> None:
    p, sent = publisher(beat=1.0)
    p.closed(Counts(3, 3, 0, clock.now), complete=True)
    clock.advance(100)
    p.tick(Counts(4, 4, 0, clock.now), caught_up=True)
    assert len(sent) == 1


def test_caught_up_news_waits_to_settle(clock: FakeClock) -> None:
    p, sent = publisher()
    p.opened(Counts(0, 0, 0, clock.now))
    clock.advance(SPACING)
    p.tick(Counts(5, 5, 0, clock.now), caught_up=True)
    assert len(sent) == 1  # caught up just now: not said yet
    clock.advance(SETTLE)
    p.tick(Counts(5, 5, 0, clock.now), caught_up=True)
    assert len(sent) == 2 and sent[-1]["delivered"] == 5


def test_caught_up_news_is_not_repeated_with_the_same_counts(clock: FakeClock) -> None:
    p, sent = publisher()
    p.opened(Counts(5, 5, 0, clock.now))
    for _ in range(5):
        clock.advance(SPACING + SETTLE)
        p.tick(Counts(5, 5, 0, clock.now), caught_up=True)
    assert len(sent) == 1


def test_caught_up_news_comes_at_most_every_spacing(clock: FakeClock) -> None:
    p, sent = publisher()
    p.opened(Counts(0, 0, 0, clock.now))
    p.tick(Counts(1, 1, 0, clock.now), caught_up=True)
    clock.advance(SETTLE)
    p.tick(Counts(1, 1, 0, clock.now), caught_up=True)
    assert len(sent) == 1  # settled, but within SPACING of the last publication
    clock.advance(SPACING)
    p.tick(Counts(1, 1, 0, clock.now), caught_up=True)
    assert len(sent) == 2


def test_falling_behind_resets_the_settling(clock: FakeClock) -> None:
    p, sent = publisher()
    p.opened(Counts(0, 0, 0, clock.now))
    clock.advance(SPACING)
    p.tick(Counts(1, 1, 0, clock.now), caught_up=True)
    clock.advance(SETTLE / 2)
    p.tick(Counts(2, 1, 0, clock.now), caught_up=False)
    clock.advance(SETTLE / 2)
    p.tick(Counts(2, 2, 0, clock.now), caught_up=True)
    assert len(sent) == 1


def test_a_heartbeat_comes_every_beat_while_it_writes(clock: FakeClock) -> None:
    p, sent = publisher(beat=10.0)
    p.opened(Counts(0, 0, 0, clock.now))
    for _ in range(3):
        clock.advance(10.0)
        p.tick(Counts(9, 1, 0, clock.now), caught_up=False)
    assert [s["seq"] for s in sent] == [1, 2, 3, 4]
    assert sent[-1]["beat"] == 10.0


def test_every_string_published_is_redacted(clock: FakeClock) -> None:
    token = "hf_" + "a" * 34
    sent: list[dict[str, Any]] = []
    p = Publisher({"label": f"actor {token}"}, lambda state: sent.append(state) or True, live=True)
    p.opened(Counts(0, 0, 0, clock.now))
    assert token not in str(sent[0])


def test_identity_names_the_host_and_the_sync_command() -> None:
    who = identity(label="actor-r1", role="actor", rank=1, pid=7, tracking_dir="/td", host="node-3")
    assert {k: who[k] for k in ("label", "role", "rank", "host", "pid", "tracking_dir")} == {
        "label": "actor-r1",
        "role": "actor",
        "rank": 1,
        "host": "node-3",
        "pid": 7,
        "tracking_dir": "/td",
    }
    assert "sync" in who["sync"] and "/td" in who["sync"]


# -- a finishing primary's side -------------------------------------------------------------------
@pytest.mark.parametrize(
    "state, expected",
    [
        ({"journaled": 10, "delivered": 10, "rejected": 0}, True),
        ({"journaled": 10, "delivered": 8, "rejected": 2}, True),
        ({"journaled": 10, "delivered": 9, "rejected": 0}, False),
        ({}, True),
        ({"journaled": "x"}, False),
    ],
)
def test_caught_up(state: dict[str, Any], expected: bool) -> None:
    assert caught_up(state) is expected


@pytest.mark.parametrize(
    "beat, first, now, expected",
    [
        (10.0, 0.0, 31.9, False),
        (10.0, 0.0, 32.1, True),
        (0.0, 0.0, 1000.0, False),  # no heartbeats: never silent
        (1.0, 5.0, 9.0, False),
        (1.0, 5.0, 10.5, True),
    ],
)
def test_silent_after_three_missed_beats_and_some_slack(beat: float, first: float, now: float, expected: bool) -> None:
    assert silent({"beat": beat}, Seen("p", first, None), now) is expected


@pytest.mark.parametrize("said, verdict", [(COMPLETE, "done"), (INCOMPLETE, "owing")])
def test_judge_a_closed_writer(said: str, verdict: str) -> None:
    assert judge({"state": said}, Seen("p", 0.0, None), began=50.0, now=60.0) == verdict


def test_judge_a_caught_up_publication_made_after_the_close_began() -> None:
    state = {"state": WRITING, "journaled": 5, "delivered": 5, "beat": 10.0}
    assert judge(state, Seen("p", 61.0, 60.5), began=60.0, now=61.0) == "done"


def test_judge_a_caught_up_publication_made_before_the_close_began() -> None:
    state = {"state": WRITING, "journaled": 5, "delivered": 5, "beat": 10.0}
    assert judge(state, Seen("p", 61.0, None), began=60.0, now=61.0) == "waiting"
    assert judge(state, Seen("p", 61.0, 59.0), began=60.0, now=61.0) == "waiting"


def test_judge_a_writer_that_delivered_everything_logged_before_the_close() -> None:
    state = {"state": WRITING, "journaled": 9, "delivered": 5, "behind": 2.0, "beat": 10.0}
    assert judge(state, Seen("p", 70.0, 65.0), began=60.0, now=70.0) == "done"  # made at 65, through 63
    state["behind"] = 8.0
    assert judge(state, Seen("p", 70.0, 65.0), began=60.0, now=70.0) == "waiting"  # through 57 only


def test_judge_a_silent_writer_owing() -> None:
    state = {"state": WRITING, "journaled": 9, "delivered": 5, "beat": 1.0}
    assert judge(state, Seen("p", 0.0, None), began=60.0, now=100.0) == "owing"


def test_await_writers_returns_at_once_when_everyone_is_done(clock: FakeClock) -> None:
    reads = [{"me": {"state": WRITING}, "critic": {"state": COMPLETE, "label": "critic"}}]
    owing = await_writers(lambda: reads[0], own="me", tracking_dir="/td", since=clock.now, until=clock.now + 30, stop=FakeEvent(clock))
    assert owing == {}
    assert clock.now == 1000.0  # no wait


def test_await_writers_names_those_that_close_incomplete(clock: FakeClock) -> None:
    state = {"state": INCOMPLETE, "label": "critic", "role": "critic", "rank": 0, "host": "n2", "journaled": 9, "delivered": 4, "rejected": 1, "sync": "tracking-core sync /td"}
    owing = await_writers(lambda: {"critic": state}, own="me", tracking_dir="/td", since=clock.now, until=clock.now + 30, stop=FakeEvent(clock))
    assert list(owing) == ["critic"]
    assert {k: owing["critic"][k] for k in ("state", "journaled", "delivered", "owed", "host")} == {
        "state": INCOMPLETE,
        "journaled": 9,
        "delivered": 4,
        "owed": 4,
        "host": "n2",
    }


def test_await_writers_waits_for_a_writer_until_it_is_caught_up(clock: FakeClock) -> None:
    states = iter([
        {"state": WRITING, "journaled": 9, "delivered": 4, "beat": 30.0, "seq": 1},
        {"state": WRITING, "journaled": 9, "delivered": 9, "beat": 30.0, "seq": 2},
    ])
    current: dict[str, Any] = {}

    def read() -> dict[str, Any]:
        current["critic"] = next(states, current.get("critic"))
        return dict(current)

    owing = await_writers(read, own="me", tracking_dir="/td", since=clock.now, until=clock.now + 30, stop=FakeEvent(clock))
    assert owing == {}
    assert clock.now == 1001.0  # one read later


def test_await_writers_gives_up_at_until_and_names_the_writer(clock: FakeClock) -> None:
    state = {"state": WRITING, "journaled": 9, "delivered": 4, "beat": 100.0, "label": "critic"}
    owing = await_writers(lambda: {"critic": state}, own="me", tracking_dir="/td", since=clock.now, until=clock.now + 5, stop=FakeEvent(clock))
    assert list(owing) == ["critic"] and owing["critic"]["owed"] == 5
    assert clock.now == 1005.0


def test_await_writers_stops_when_told() -> None:
    stop = threading.Event()
    stop.set()
    state = {"state": WRITING, "journaled": 9, "delivered": 4, "beat": 100.0}
    owing = await_writers(lambda: {"critic": state}, own="me", tracking_dir="/td", since=0.0, until=float("inf"), stop=stop)
    assert list(owing) == ["critic"]


def test_await_writers_passes_over_writers_handled_here(clock: FakeClock, tmp_path: Any) -> None:
    import socket

    state = {"state": INCOMPLETE, "host": socket.gethostname(), "tracking_dir": str(tmp_path)}
    owing = await_writers(lambda: {"actor": state}, own="me", tracking_dir=tmp_path, since=clock.now, until=clock.now, stop=FakeEvent(clock))
    assert owing == {}


def test_await_writers_with_no_registry_owes_nothing(clock: FakeClock) -> None:
    assert await_writers(lambda: None, own="me", tracking_dir="/td", since=clock.now, until=clock.now + 3, stop=FakeEvent(clock)) == {}


def test_handled_here_needs_this_host_and_this_tracking_dir(tmp_path: Any) -> None:
    import socket

    host = socket.gethostname()
    assert handled_here({"host": host, "tracking_dir": str(tmp_path)}, tmp_path)
    assert not handled_here({"host": host, "tracking_dir": str(tmp_path / "other")}, tmp_path)
    assert not handled_here({"host": "elsewhere", "tracking_dir": str(tmp_path)}, tmp_path)
    assert not handled_here({"host": host}, tmp_path)


def test_owing_entry_says_how_long_ago_it_was_heard() -> None:
    entry = owing_entry({"state": WRITING, "journaled": 10, "delivered": 3, "rejected": 2, "sync": "s"}, Seen("p", 100.0, None), 112.34)
    assert (entry["owed"], entry["last_heard"], entry["heard_before"], entry["sync"]) == (5, 12.3, True, "s")


def test_owing_text_of_a_writer_still_writing() -> None:
    entry = {"role": "actor", "rank": 2, "host": "n4", "label": "actor-r2", "state": WRITING, "owed": 5, "journaled": 9, "last_heard": 12.0, "heard_before": False, "sync": "tracking-core sync /td"}
    assert owing_text(entry) == (
        "actor rank 2 on host n4 (actor-r2) still writing when last heard 12 s ago: 5 of 9 journaled "
        "values undelivered then, and what it logged since is in its journal there; run on n4: tracking-core sync /td"
    )


def test_owing_text_of_a_writer_closed_incomplete() -> None:
    entry = {"host": "n1", "label": "primary", "state": INCOMPLETE, "owed": 1, "journaled": 2, "last_heard": 3.0, "heard_before": True, "sync": "S"}
    assert owing_text(entry) == "primary on host n1 (primary) closed incomplete (last heard over 3 s ago): 1 of 2 journaled values undelivered; run on n1: S"


def test_owing_text_of_a_writer_never_heard() -> None:
    entry = {"role": "critic", "host": "n9", "label": "critic-r0", "state": UNHEARD, "sync": "S"}
    assert owing_text(entry) == (
        "critic on host n9 (critic-r0) attached and never reached the tracker: everything it logged is in its journal there; run on n9: S"
    )
