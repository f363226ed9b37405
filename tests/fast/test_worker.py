"""A backend's worker, in process: delivery in order, retries, the circuit breaker and its
probes, recovery exactly once, bad records set aside, and what it reports."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pytest

from tests.fast.fakes import (
    FakeTracker,
    TextTracker,
    config,
    end,
    follower_for,
    row,
    rows,
    wait_for,
)
from tracking_core.delivery import worker as worker_module
from tracking_core.delivery.entries import Table
from tracking_core.records import RunStatus


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries at most 0.2 s apart: the rules are the same, the tests faster."""
    monkeypatch.setattr(worker_module, "MAX_RETRY_DELAY", 0.2)


def test_rows_are_delivered_in_order_with_their_steps() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", rows(0, 5)))
    assert follower.drain(4, 5.0)
    assert tracker.metrics == [("loss", float(i), i) for i in range(5)]
    follower.stop()


def test_the_run_is_opened_at_its_target_before_any_row() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", rows(0, 2)))
    assert follower.drain(1, 5.0)
    assert tracker.calls[0] == "open_run"
    assert tracker.opened == [{"where": "fake"}]
    follower.stop()


def test_an_attaching_worker_attaches_with_its_entry() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker}, action="attach")
    follower.feed(("records", rows(0, 1)))
    assert follower.drain(0, 5.0)
    assert tracker.calls[0] == "attach_run"
    assert tracker.attached == [{"where": "fake"}]
    assert tracker.opened == []
    follower.stop()


def test_on_opened_hears_the_open_result() -> None:
    from tests.fast.fakes import manager_with, plan_for
    from tracking_core.delivery.follower import Follower

    heard: list[tuple[str, object]] = []
    tracker = FakeTracker()
    follower = Follower(plan_for(["fake"]), manager_with({"fake": tracker}), on_opened=lambda n, r: heard.append((n, r)))
    follower.start()
    follower.feed(("records", rows(0, 1)))
    assert follower.drain(0, 5.0)
    assert heard == [("fake", {"run": "r-1"})]
    follower.stop()


def test_rows_of_one_kind_go_in_one_batch_up_to_max_batch() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    worker = follower.workers["fake"]
    worker.batches.max_batch = 4
    follower.feed(("records", rows(0, 10)))
    assert follower.drain(9, 5.0)
    assert sum(tracker.batches) == 10
    assert max(tracker.batches) <= 4
    follower.stop()


def test_a_row_of_several_values_counts_each_value() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [row(0, {"a": 1.0, "b": 2.0, "c": 3.0}, step=7)]))
    assert follower.drain(0, 5.0)
    assert sorted(tracker.metrics) == [("a", 1.0, 7), ("b", 2.0, 7), ("c", 3.0, 7)]
    assert follower.workers["fake"].progress.delivered == 3
    follower.stop()


def test_a_config_section_is_delivered_and_counted_apart_from_values() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [config(0, "launch"), row(1, {"loss": 1.0})]))
    assert follower.drain(1, 5.0)
    progress = follower.workers["fake"].progress
    assert tracker.configs == ["launch"]
    assert (progress.delivered, progress.configs) == (1, 1)
    follower.stop()


def test_a_failing_call_is_retried_until_it_goes_through() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    assert follower.drain(-1, 5.0)  # opened
    tracker.failures_left = 1
    follower.feed(("records", rows(0, 3)))
    assert wait_for(lambda: follower.workers["fake"].progress.n == 2)
    assert tracker.metrics == [("loss", float(i), i) for i in range(3)]
    assert tracker.calls.count("log_metrics") == 2
    assert follower.workers["fake"].report()["failures"] == {"log_metrics: ConnectionError": 1}
    follower.stop()


def test_each_kind_of_failure_is_said_once_then_counted(caplog: pytest.LogCaptureFixture) -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    assert follower.drain(-1, 5.0)
    tracker.down = True
    follower.feed(("records", rows(0, 1)))
    worker = follower.workers["fake"]
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        assert wait_for(lambda: worker.breaker.counts["log_metrics: ConnectionError"] >= 4)
    said = [r for r in caplog.records if "failed in log_metrics" in r.getMessage()]
    assert len(said) == 1
    assert "ConnectionError: tracker unreachable" in said[0].getMessage()
    follower.stop()


def test_three_failures_in_a_row_open_the_circuit() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    assert follower.drain(-1, 5.0)
    tracker.down = True
    follower.feed(("records", rows(0, 1)))
    worker = follower.workers["fake"]
    assert wait_for(lambda: worker.circuit_open)
    assert worker.report()["circuit_open"] is True
    assert worker.breaker.down_since is not None
    follower.stop()


def test_a_drain_returns_false_once_the_circuit_is_open_and_probed() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    assert follower.drain(-1, 5.0)
    tracker.down = True
    follower.feed(("records", rows(0, 2)))
    worker = follower.workers["fake"]
    assert wait_for(lambda: worker.circuit_open)
    assert follower.drain(1, 10.0) is False
    assert worker.progress.n == -1  # nothing acknowledged: the rows wait
    follower.stop()


def test_a_tracker_that_is_back_gets_what_it_missed_exactly_once(caplog: pytest.LogCaptureFixture) -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    assert follower.drain(-1, 5.0)
    follower.feed(("records", rows(0, 5)))
    assert follower.drain(4, 5.0)
    tracker.down = True
    follower.feed(("records", rows(5, 5)))
    worker = follower.workers["fake"]
    assert wait_for(lambda: worker.circuit_open)
    tracker.down = False
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        follower.feed(("records", rows(10, 5)))
        assert follower.drain(14, 5.0)
    steps = Counter(step for _, _, step in tracker.metrics)
    assert steps == Counter({s: 1 for s in range(15)})
    assert [r.getMessage().split(" after ")[0] for r in caplog.records if "is back" in r.getMessage()] == [
        "backend 'fake' is back"
    ]
    assert not worker.circuit_open
    follower.stop()


def test_a_drain_wakes_the_probe_of_an_open_circuit_at_once() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    assert follower.drain(-1, 5.0)
    tracker.down = True
    follower.feed(("records", rows(0, 1)))
    worker = follower.workers["fake"]
    assert wait_for(lambda: worker.circuit_open)
    calls = tracker.calls.count("log_metrics")
    assert follower.drain(0, 5.0) is False
    assert tracker.calls.count("log_metrics") > calls  # probed since the drain began
    follower.stop()


def test_a_metric_the_tracker_refuses_is_rejected_and_the_rest_delivered(caplog: pytest.LogCaptureFixture) -> None:
    tracker = FakeTracker()
    tracker.refuse = {"bad"}
    follower = follower_for({"fake": tracker})
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        follower.feed(("records", [row(0, {"good": 1.0, "bad": 2.0}), row(1, {"good": 3.0, "bad": 4.0})]))
        assert follower.drain(1, 10.0)
    progress = follower.workers["fake"].progress
    assert sorted(tracker.metrics) == [("good", 1.0, None), ("good", 3.0, None)]
    assert (progress.delivered, progress.rejected) == (2, 2)
    rejected = [r.getMessage() for r in caplog.records if "rejects metric" in r.getMessage()]
    assert len(rejected) == 1 and "'bad'" in rejected[0]
    assert not follower.workers["fake"].circuit_open  # bad data is not an outage
    follower.stop()


def test_a_lone_bad_row_is_set_aside_once_a_later_row_gets_through() -> None:
    tracker = FakeTracker()
    tracker.refuse = {"bad"}
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [row(0, {"bad": 1.0}), row(1, {"x": 2.0}), config(2), row(3, {"good": 3.0})]))
    assert follower.drain(3, 10.0)
    progress = follower.workers["fake"].progress
    assert tracker.names() == ["x", "good"]
    assert (progress.delivered, progress.rejected, progress.n) == (2, 1, 3)
    follower.stop()


def test_a_refused_config_section_is_owed_not_lost() -> None:
    tracker = FakeTracker()
    tracker.refuse_config = {"actor"}
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [config(0, "actor"), row(1, {"loss": 1.0})]))
    assert wait_for(lambda: follower.workers["fake"].progress.n == 1, 10.0)
    worker = follower.workers["fake"]
    assert worker.progress.owed == [0]
    assert worker.report()["missing_configs"] == ["actor"]
    assert tracker.names() == ["loss"]
    follower.stop()


def test_when_nothing_gets_through_the_tracker_is_down_not_the_data() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    assert follower.drain(-1, 5.0)
    tracker.down = True
    follower.feed(("records", [row(0, {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0})]))
    worker = follower.workers["fake"]
    assert wait_for(lambda: worker.circuit_open)
    assert (worker.progress.rejected, worker.progress.delivered) == (0, 0)
    follower.stop()


def test_a_record_without_a_hook_goes_through_its_fallback(caplog: pytest.LogCaptureFixture) -> None:
    tracker = TextTracker()
    follower = follower_for({"fake": tracker})
    table = Table(0, 1.0, "samples", ["a"], [["x"]], 3, None).encode()
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        follower.feed(("records", [table]))
        assert follower.drain(0, 5.0)
    assert tracker.texts == ["samples"]
    assert follower.workers["fake"].progress.delivered == 1
    assert any("has no log_table hook" in r.getMessage() for r in caplog.records)
    follower.stop()


def test_a_record_with_neither_hook_nor_fallback_is_counted_rejected(caplog: pytest.LogCaptureFixture) -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    tables = [Table(n, 1.0, "samples", ["a"], [["x"]], n, None).encode() for n in range(2)]
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        follower.feed(("records", tables))
        assert follower.drain(1, 5.0)
    progress = follower.workers["fake"].progress
    assert (progress.delivered, progress.rejected) == (0, 2)
    said = [r.getMessage() for r in caplog.records if "takes no" in r.getMessage()]
    assert len(said) == 1 and "neither log_table nor log_text" in said[0]
    follower.stop()


def test_a_record_kind_this_version_does_not_know_is_passed_over() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [{"n": 0, "t": "hologram", "x": 1}, row(1, {"loss": 1.0})]))
    assert follower.drain(1, 5.0)
    assert tracker.names() == ["loss"]
    assert follower.workers["fake"].progress.rejected == 0
    follower.stop()


def test_a_damaged_line_is_rejected_and_the_next_delivered() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [{"n": 0, "t": "row", "m": {"loss": 1.0}}, row(1, {"loss": 2.0}), row(2, {"loss": 3.0})]))
    assert follower.drain(2, 10.0)
    progress = follower.workers["fake"].progress
    assert tracker.metrics == [("loss", 2.0, None), ("loss", 3.0, None)]
    assert progress.rejected == 1
    follower.stop()


def test_the_end_closes_the_run_with_the_status_meant() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [*rows(0, 2), end(2, "FINISHED")]))
    report = follower.finish(2, 5.0)
    assert tracker.closed == [RunStatus.FINISHED]
    assert report["outstanding"] == {}
    assert report["end_n"] == 2


@pytest.mark.parametrize("status", ["FAILED", "KILLED"])
def test_the_close_carries_a_failed_or_killed_status(status: str) -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [row(0, {"x": 1.0}), end(1, status)]))
    follower.finish(1, 5.0)
    assert tracker.closed == [RunStatus(status)]


def test_a_secondary_only_detaches_with_finished() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker}, primary=False)
    follower.feed(("records", [row(0, {"x": 1.0}), end(1, "FAILED")]))
    follower.finish(1, 5.0)
    assert tracker.closed == [RunStatus.FINISHED]


def test_an_end_without_a_status_closes_killed() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [{"n": 0, "t": "end", "status": None, "ts": 1.0}]))
    follower.finish(0, 5.0)
    assert tracker.closed == [RunStatus.KILLED]


def test_a_finish_with_the_tracker_down_reports_what_is_outstanding() -> None:
    tracker = FakeTracker()
    tracker.down = True
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [*rows(0, 3), end(3)]))
    report = follower.finish(3, 1.0)
    assert report["outstanding"] == {"fake": "records 0..3 (the close included)"}
    assert report["backends"]["fake"]["ready"] is False
    assert tracker.closed == []


def test_report_counts_plain_data() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", rows(0, 4)))
    assert follower.drain(3, 5.0)
    assert follower.workers["fake"].report() == {
        "n": 3,
        "delivered": 4,
        "rejected": 0,
        "failures": {},
        "missing_configs": [],
        "ready": True,
        "circuit_open": False,
    }
    follower.stop()


def test_a_slow_backend_holds_rows_back_for_its_batch_interval() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    assert follower.drain(-1, 5.0)
    batches = follower.workers["fake"].batches
    batches.batch_interval = 30.0
    batches.last_delivery = float("inf")  # as if it had just delivered
    follower.feed(("records", rows(0, 3)))
    follower.wake()
    assert not wait_for(lambda: tracker.metrics != [], 0.2)
    assert follower.drain(2, 5.0)  # a drain is urgent: nothing is held back
    assert len(tracker.metrics) == 3
    follower.stop()


def test_two_backends_each_get_everything_whatever_the_other_does() -> None:
    good, bad = FakeTracker(), FakeTracker()
    bad.down = True
    follower = follower_for({"good": good, "bad": bad})
    follower.feed(("records", [*rows(0, 5), end(5)]))
    report = follower.finish(5, 1.5)
    assert len(good.metrics) == 5 and good.closed == [RunStatus.FINISHED]
    assert list(report["outstanding"]) == ["bad"]
    assert report["backends"]["good"]["delivered"] == 5


def test_the_backend_instance_is_a_plugin_only_for_the_run() -> None:
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker})
    follower.feed(("records", [row(0, {"x": 1.0}), end(1)]))
    slot = follower.workers["fake"].slot
    assert follower.drain(0, 5.0)
    assert slot.plugin_name == "fake"
    follower.finish(1, 5.0)
    assert slot.plugin_name is None


def test_a_journal_on_disk_is_delivered_and_removed(tmp_path: Path) -> None:
    from tests.fast.fakes import journal_with

    folder = journal_with(tmp_path / "j", [*rows(0, 3), end(3)])
    tracker = FakeTracker()
    follower = follower_for({"fake": tracker}, folder)
    report = follower.finish(3, 5.0)
    assert [s for _, _, s in tracker.metrics] == [0, 1, 2]
    assert report["outstanding"] == {}
    assert not folder.exists()


def test_each_tracker_call_is_traced_with_its_backend_and_reaches_only_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """TRACKING_CORE_TRACE_PLUGINS=1: every call into a backend is logged before and after it,
    naming the backend; each of two backends gets its own records once (no call reaches the other)."""
    from tests.fast.fakes import journal_with

    monkeypatch.setenv("TRACKING_CORE_TRACE_PLUGINS", "1")
    caplog.set_level(logging.INFO, logger="tracking_core.trace")
    folder = journal_with(tmp_path / "j", [*rows(0, 3), end(3)])
    one, two = FakeTracker(), FakeTracker()
    report = follower_for({"one": one, "two": two}, folder).finish(3, 5.0)
    assert report["outstanding"] == {}
    assert len(one.metrics) == len(two.metrics) == 3  # each value once, in its own backend
    traced = [r.getMessage() for r in caplog.records if r.name == "tracking_core.trace"]
    for name in ("one", "two"):
        calls = [m for m in traced if f"backend {name}" in m]
        assert any(m.startswith("log_metrics [hook] backend ") for m in calls), traced
        assert any(m.startswith("close_run [hook] backend ") for m in calls), traced
    assert sum(m.startswith("finish log_metrics --> ") for m in traced) >= 2, traced
