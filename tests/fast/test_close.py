"""The close verdict and the registry's publications of a worker, with a tracker that keeps the
job's writer registry in memory."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.fast.fakes import (
    FakeTracker,
    RegistryTracker,
    context,
    end,
    follower_for,
    rows,
    wait_for,
)
from tracking_core.delivery import verdict as verdict_module
from tracking_core.delivery.failures import Breaker
from tracking_core.delivery.verdict import CloseVerdict
from tracking_core.delivery.worker import BackendSlot
from tracking_core.delivery.writers import COMPLETE, INCOMPLETE, WRITING, Counts, Registration
from tracking_core.records import RunStatus


@pytest.fixture(autouse=True)
def short_patience(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verdict_module, "CLOSING_PATIENCE", 0.0)


def registration(tracker: FakeTracker, writer: dict[str, Any] | None = None) -> Registration:
    from tests.fast.fakes import manager_with

    manager = manager_with({"fake": tracker})
    slot = BackendSlot(manager.select(["fake"])[0], context(label="actor-r0", role="actor", rank=0), manager)
    return Registration(slot, Breaker("fake"), writer)


def test_a_backend_without_a_registry_publishes_nothing() -> None:
    r = registration(FakeTracker())
    r.opened(Counts(0, 0, 0, 0.0))
    assert r.publisher is None


def test_the_open_run_is_published_as_writing_with_who_it_is() -> None:
    tracker = RegistryTracker()
    r = registration(tracker)
    r.opened(Counts(0, 0, 0, 0.0))
    assert [(p["state"], p["label"], p["role"], p["rank"], p["pid"]) for p in tracker.published] == [(WRITING, "actor-r0", "actor", 0, 4242)]


def test_a_replay_publishes_the_gone_writer_once_at_its_close() -> None:
    tracker = RegistryTracker()
    r = registration(tracker, writer={"label": "actor-r3", "host": "n7"})
    r.opened(Counts(0, 0, 0, 0.0))
    assert tracker.published == []
    r.closed(Counts(4, 4, 0, 0.0), complete=True)
    r.closed(Counts(4, 4, 0, 0.0), complete=True)
    assert [(p["state"], p["label"], p["host"]) for p in tracker.published] == [(COMPLETE, "actor-r3", "n7")]
    assert r.own == "actor-r3"


def test_a_publication_that_fails_is_counted_and_costs_nothing_else() -> None:
    tracker = RegistryTracker()
    tracker.publish_fails = True
    r = registration(tracker)
    r.opened(Counts(0, 0, 0, 0.0))
    r.closed(Counts(1, 1, 0, 0.0), complete=True)
    assert r.breaker.counts == {"publish_writer: ConnectionError": 2}
    assert r.breaker.streak == 0  # the registry never opens the circuit


def test_read_keeps_the_other_writers() -> None:
    tracker = RegistryTracker()
    tracker.writers = {"actor-r0": {"state": WRITING}, "critic-r0": {"state": COMPLETE}, "junk": "x"}  # type: ignore[dict-item]
    r = registration(tracker)
    assert r.read() == tracker.writers
    assert r.registry == {"critic-r0": {"state": COMPLETE}}


def test_a_registry_that_cannot_be_read_is_none() -> None:
    tracker = RegistryTracker()
    tracker.writers = None
    assert registration(tracker).read() is None


def verdict(tracker: FakeTracker) -> CloseVerdict:
    return CloseVerdict(registration(tracker), threading.Event())


def test_without_a_registry_the_status_meant_stands() -> None:
    v = verdict(FakeTracker())
    assert v.judge(RunStatus.FINISHED, 0.0) is RunStatus.FINISHED
    assert v.owing == {}


def test_a_writer_that_owes_data_fails_a_finished_run() -> None:
    tracker = RegistryTracker()
    tracker.writers = {"critic-r0": {"state": INCOMPLETE, "label": "critic-r0", "journaled": 5, "delivered": 2}}
    v = verdict(tracker)
    assert v.judge(RunStatus.FINISHED, 0.0) is RunStatus.FAILED
    assert list(v.owing) == ["critic-r0"] and v.owing["critic-r0"]["owed"] == 3


@pytest.mark.parametrize("meant", [RunStatus.FAILED, RunStatus.KILLED])
def test_a_run_not_meant_finished_keeps_its_status(meant: RunStatus) -> None:
    tracker = RegistryTracker()
    tracker.writers = {"critic-r0": {"state": INCOMPLETE}}
    assert verdict(tracker).judge(meant, 0.0) is meant


def test_the_verdict_is_judged_once() -> None:
    tracker = RegistryTracker()
    tracker.writers = {"critic-r0": {"state": INCOMPLETE}}
    v = verdict(tracker)
    assert v.judge(RunStatus.FINISHED, 0.0) is RunStatus.FAILED
    tracker.writers = {}
    assert v.judge(RunStatus.FINISHED, 0.0) is RunStatus.FAILED


def test_a_writer_still_writing_is_waited_for_until_close_by() -> None:
    tracker = RegistryTracker()
    tracker.writers = {"critic-r0": {"state": WRITING, "journaled": 5, "delivered": 2, "beat": 100.0}}
    v = verdict(tracker)
    import time

    v.close_by(time.monotonic() + 0.3)
    started = time.monotonic()
    assert v.judge(RunStatus.FINISHED, time.time()) is RunStatus.FAILED
    assert 0.25 <= time.monotonic() - started < 3.0


def test_the_primary_closes_failed_and_publishes_its_own_end_incomplete_of_others() -> None:
    tracker = RegistryTracker()
    tracker.writers = {"critic-r0": {"state": INCOMPLETE, "label": "critic-r0", "host": "n2", "journaled": 5, "delivered": 2}}
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [*rows(0, 3), end(3)]))
    report = follower.finish(3, 2.0)
    assert tracker.closed == [RunStatus.FAILED]
    last = tracker.published[-1]
    assert last["state"] == COMPLETE and last["intended_status"] == "FINISHED"
    assert "critic-r0" in last["incomplete"]
    assert report["writers"]["critic-r0"]["backends"] == ["fake"]
    assert report["job"] == {"fake": {"critic-r0": tracker.writers["critic-r0"]}}


def test_the_writers_publications_follow_its_delivery() -> None:
    tracker = RegistryTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [*rows(0, 3), end(3)]))
    follower.finish(3, 2.0)
    states = [p["state"] for p in tracker.published]
    assert states[0] == WRITING and states[-1] == COMPLETE
    assert (tracker.published[-1]["journaled"], tracker.published[-1]["delivered"]) == (3, 3)


def test_a_close_that_does_not_get_through_is_published_incomplete() -> None:
    tracker = RegistryTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", rows(0, 2)))
    assert follower.drain(1, 5.0)
    tracker.down = True
    follower.feed(("records", [end(2)]))
    follower.finish(2, 0.5)
    assert wait_for(lambda: tracker.published[-1]["state"] == INCOMPLETE, 2.0)
    assert tracker.closed == []
