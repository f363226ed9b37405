"""What a worker delivers next: batches of one kind, read from memory or a journal under
tmp_path, records already done skipped, owed configs offered again, and the counts it publishes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.fast.fakes import config, end, journal_with, row, rows
from tracking_core.delivery.batches import MAX_BATCH, Batches
from tracking_core.delivery.entries import Config, End, Row
from tracking_core.delivery.progress import BackendProgress
from tracking_core.delivery.stream import Stream


def batches(progress: BackendProgress | None = None, folder: Path | None = None, **kwargs: float) -> Batches:
    p = progress or BackendProgress()
    return Batches(Stream(folder), lambda: p, threading.Condition(), **kwargs)  # type: ignore[arg-type]


def fed(b: Batches, *lines: dict) -> Batches:  # type: ignore[type-arg]
    b.stream.put(("records", list(lines)))
    return b


def test_nothing_to_deliver_is_an_empty_batch() -> None:
    assert batches().next() == []


def test_consecutive_rows_go_in_one_batch() -> None:
    b = fed(batches(), *rows(0, 5))
    batch = b.next()
    assert [e.n for e in batch] == [0, 1, 2, 3, 4]
    assert all(isinstance(e, Row) for e in batch)


def test_a_batch_holds_one_kind() -> None:
    b = fed(batches(), *rows(0, 2), config(2), *rows(3, 2), end(5))
    kinds = [[type(e).__name__ for e in b.next()] for _ in range(4)]
    assert kinds == [["Row", "Row"], ["Config"], ["Row", "Row"], ["End"]]
    assert b.next() == []


def test_a_batch_stops_at_max_batch_values() -> None:
    b = fed(batches(max_batch=3), *[row(n, {"a": 1.0, "b": 2.0}) for n in range(4)])
    assert [len(b.next()) for _ in range(3)] == [2, 2, 0]


def test_max_batch_defaults_to_a_thousand() -> None:
    assert batches().max_batch == MAX_BATCH == 1000


def test_records_already_done_are_skipped() -> None:
    b = fed(batches(BackendProgress(n=2)), *rows(0, 5))
    assert [e.n for e in b.next()] == [3, 4]


def test_an_owed_config_is_offered_again_and_awaited() -> None:
    b = fed(batches(BackendProgress(n=3, owed=[1])), *rows(0, 1), config(1), *rows(2, 2), end(4))
    assert b.retrying_owed()
    batch = b.next()
    assert [type(e) for e in batch] == [Config] and batch[0].n == 1
    assert b.retrying_owed()  # read, not done yet
    b.done(batch)
    assert not b.retrying_owed()
    assert [type(e) for e in b.next()] == [End]


def test_an_owed_record_the_stream_went_past_is_not_awaited() -> None:
    b = fed(batches(BackendProgress(n=3, owed=[1])), *rows(0, 1), *rows(2, 2))
    b.final = True
    b.next()
    assert not b.retrying_owed()


def test_rows_are_held_back_for_the_batch_interval() -> None:
    b = fed(batches(batch_interval=60.0), *rows(0, 3))
    b.last_delivery = float("inf")
    assert b.next() == []
    assert [e.n for e in b.next(urgent=True)] == [0, 1, 2]


def test_a_full_batch_is_not_held_back() -> None:
    b = fed(batches(batch_interval=60.0, max_batch=2), *rows(0, 3))
    b.last_delivery = float("inf")
    assert [e.n for e in b.next()] == [0, 1]


def test_rows_are_not_held_back_before_something_else() -> None:
    b = fed(batches(batch_interval=60.0), *rows(0, 2), end(2))
    b.last_delivery = float("inf")
    assert [e.n for e in b.next()] == [0, 1]


def test_put_back_keeps_the_order() -> None:
    b = fed(batches(), *rows(0, 2), end(2))
    first = b.next()
    b.put_back(first)
    assert [e.n for e in b.next()] == [0, 1]


def test_done_moves_the_time_through_which_all_is_delivered() -> None:
    b = fed(batches(), row(0, {"a": 1.0}, ts=50.0), row(1, {"a": 1.0}, ts=60.0))
    b.done(b.next())
    assert b.done_ts == 60.0


def test_counts_count_what_waits_as_journaled() -> None:
    b = fed(batches(BackendProgress(n=1, delivered=2, rejected=1)), row(2, {"a": 1.0, "b": 2.0}, ts=70.0))
    b.fill()
    counts = b.counts(idle=False, poll=0.5)
    assert counts == (5, 2, 1, pytest.approx(69.999))


def test_idle_counts_say_everything_logged_a_poll_ago_is_delivered() -> None:
    import time

    b = batches()
    counts = b.counts(idle=True, poll=0.5)
    assert counts.journaled == 0
    assert time.time() - 0.6 < counts.through <= time.time() - 0.5


def test_a_journal_on_disk_is_read_in_order(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", [*rows(0, 3), end(3)])
    b = batches(folder=folder)
    assert [e.n for e in b.next()] == [0, 1, 2]
    assert isinstance(b.next()[0], End)


def test_a_journal_and_memory_make_one_sequence(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", rows(0, 2))
    b = fed(batches(folder=folder), *rows(2, 2))
    assert [e.n for e in b.next()] == [0, 1, 2, 3]


def test_a_repeated_record_is_read_once(tmp_path: Path) -> None:
    folder = journal_with(tmp_path / "j", rows(0, 3))
    b = fed(batches(folder=folder), *rows(1, 3))
    assert [e.n for e in b.next()] == [0, 1, 2, 3]
