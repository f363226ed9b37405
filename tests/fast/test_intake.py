"""The writer's intake: numbering, what is skipped and counted, backpressure, and where records go
when the journal under tmp_path refuses them (the spill journal, then memory)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from tracking_core import settings
from tracking_core.delivery import journal, kinds
from tracking_core.delivery.intake import MIN_BOUND, Intake, to_float
from tracking_core.records import ConfigSection


class Refusing(journal.JournalWriter):
    """A journal whose disk is full while ``full`` is set."""

    full = False

    def append(self, data: bytes) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device")
        super().append(data)


class Delivery:
    """What the intake hands over in memory."""

    def __init__(self) -> None:
        self.fed: list[Any] = []
        self.woken = 0

    def feed(self, message: Any) -> None:
        self.fed.append(message)

    def wake(self) -> None:
        self.woken += 1


def intake(tmp_path: Path, writer: journal.JournalWriter | None = None, **kwargs: Any) -> Intake:
    if writer is None:
        writer = journal.JournalWriter(tmp_path / "j", {"backends": ["fake"]}, 1 << 20)
    return Intake(writer, "", 0.5, str(tmp_path / "j"), run_id="run-1", **kwargs)


def metric(ts: float, values: dict[str, Any], step: Any = None, step_key: Any = None) -> tuple[Any, ...]:
    return (kinds.METRIC, ts, values, step, step_key)


def lines(folder: Path) -> list[dict[str, Any]]:
    out = []
    for _, path in journal.segments(folder):
        out += [journal.parse_line(raw) for raw in path.read_bytes().splitlines()]
    return [line for line in out if line is not None]


def test_records_are_numbered_from_zero_in_order(tmp_path: Path) -> None:
    i = intake(tmp_path)
    for step in range(3):
        i.items.append(metric(1.0, {"loss": step}, step))
    assert i.pump() == 2
    assert [(line["n"], line["m"], line["st"]) for line in lines(tmp_path / "j")] == [
        (0, {"loss": 0.0}, 0),
        (1, {"loss": 1.0}, 1),
        (2, {"loss": 2.0}, 2),
    ]
    assert i.logged == 3


def test_each_value_counts(tmp_path: Path) -> None:
    i = intake(tmp_path)
    i.items.append(metric(1.0, {"a": 1, "b": 2.5, "c": True}))
    i.pump()
    assert i.logged == 3
    assert lines(tmp_path / "j")[0]["m"] == {"a": 1.0, "b": 2.5, "c": 1.0}


def test_a_value_that_is_no_number_is_skipped_and_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    i = intake(tmp_path)
    i.items.append(metric(1.0, {"loss": 1.0, "name": "abc"}))
    i.items.append(metric(1.0, {"name": "def"}))
    i.pump()
    assert i.skipped == {"name": 2}
    assert [line["m"] for line in lines(tmp_path / "j")] == [{"loss": 1.0}]
    assert len([r for r in caplog.records if "is not a number" in r.getMessage()]) == 1


def test_non_finite_values_are_kept_as_their_repr(tmp_path: Path) -> None:
    i = intake(tmp_path)
    i.items.append(metric(1.0, {"a": float("nan"), "b": float("inf")}))
    i.pump()
    assert lines(tmp_path / "j")[0]["m"] == {"a": "nan", "b": "inf"}


@pytest.mark.parametrize("step, kept", [(3, 3), (3.0, 3), (None, None), ("4", 4)])
def test_steps_are_integers(tmp_path: Path, step: Any, kept: int | None) -> None:
    i = intake(tmp_path)
    i.items.append(metric(1.0, {"a": 1}, step))
    i.pump()
    assert lines(tmp_path / "j")[0]["st"] == kept


def test_a_step_that_is_no_integer_is_dropped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    i = intake(tmp_path)
    i.items.append(metric(1.0, {"a": 1}, 2.5))
    i.pump()
    assert lines(tmp_path / "j")[0]["st"] is None
    assert any("step 2.5 is not an integer" in r.getMessage() for r in caplog.records)


def test_the_step_key_is_kept(tmp_path: Path) -> None:
    i = intake(tmp_path)
    i.items.append(metric(1.0, {"a": 1}, 1, "train/step"))
    i.pump()
    assert lines(tmp_path / "j")[0]["sk"] == "train/step"


def test_a_config_section_is_journaled(tmp_path: Path) -> None:
    i = intake(tmp_path)
    i.config(ConfigSection(None, "launch", "", {"lr": 0.1}, {"lr": 0.1}))
    i.pump()
    [line] = lines(tmp_path / "j")
    assert (line["t"], line["section"]["namespace"], line["section"]["values"]) == ("config", "launch", {"lr": 0.1})


def test_the_end_comes_after_everything_logged_before_it(tmp_path: Path) -> None:
    i = intake(tmp_path)
    i.items.append(metric(1.0, {"a": 1}))
    end_n = i.end("FINISHED")
    assert end_n == 1
    assert [(line["n"], line["t"]) for line in lines(tmp_path / "j")] == [(0, "row"), (1, "end")]


def test_what_is_logged_after_the_end_is_ignored_and_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    i = intake(tmp_path)
    i.end("FINISHED")
    i.items.append(metric(1.0, {"a": 1, "b": 2}))
    i.pump()
    assert i.late == 2
    assert len(lines(tmp_path / "j")) == 1
    assert any("after finish()" in r.getMessage() for r in caplog.records)


def test_a_closed_intake_counts_what_was_still_queued(tmp_path: Path) -> None:
    i = intake(tmp_path)
    i.items.append(metric(1.0, {"a": 1}))
    i.close()
    assert i.late == 1
    assert lines(tmp_path / "j") == []


def test_the_bound_is_never_under_its_minimum(tmp_path: Path) -> None:
    i = intake(tmp_path)
    assert i.bound >= MIN_BOUND
    assert i.bound <= i.max_items


def test_queue_records_caps_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.QUEUE_RECORDS, "100")
    i = intake(tmp_path)
    assert i.max_items == 100
    assert i.bound <= 100


def test_relieve_journals_on_the_calling_thread_until_within_the_bound(tmp_path: Path) -> None:
    i = intake(tmp_path)
    i.bound = 10
    for step in range(50):
        i.items.append(metric(1.0, {"a": step}, step))
    i.relieve()
    assert len(i.items) <= 10
    assert i.relieved >= 1
    assert len(lines(tmp_path / "j")) >= 40


def test_a_full_disk_spills_to_the_spill_journal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    writer = Refusing(tmp_path / "j", {"backends": ["fake"]}, 1 << 20)
    writer.full = True
    spill = tmp_path / "spill"
    i = intake(tmp_path, writer, spill=lambda: journal.JournalWriter(spill, {"backends": ["fake"]}, 1 << 20))
    i.items.append(metric(1.0, {"a": 1, "b": 2}))
    i.pump()
    assert [line["n"] for line in lines(spill)] == [0]
    assert lines(tmp_path / "j") == []
    assert (i.spilled, i.not_journaled, i.spill_folder) == (2, 0, str(spill))
    assert any("records are journaled in" in r.getMessage() for r in caplog.records)


def test_with_no_journal_at_all_records_go_to_delivery_in_memory(tmp_path: Path) -> None:
    writer = Refusing(tmp_path / "j", {"backends": ["fake"]}, 1 << 20)
    writer.full = True
    delivery = Delivery()
    i = intake(tmp_path, writer)
    i.places.delivery = delivery
    i.items.append(metric(1.0, {"a": 1}))
    i.pump()
    assert i.not_journaled == 1
    assert [(kind, [line["n"] for line in value]) for kind, value in delivery.fed] == [("records", [0])]


def test_the_journal_is_tried_again_after_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracking_core.delivery import intake as intake_module

    monkeypatch.setattr(intake_module, "RETRY_JOURNAL", 0.0)
    writer = Refusing(tmp_path / "j", {"backends": ["fake"]}, 1 << 20)
    writer.full = True
    i = intake(tmp_path, writer)
    i.places.delivery = Delivery()
    i.items.append(metric(1.0, {"a": 1}))
    i.pump()
    writer.full = False
    i.items.append(metric(1.0, {"a": 2}))
    i.pump()
    assert [line["n"] for line in lines(tmp_path / "j")] == [1]
    assert i.not_journaled == 1


@pytest.mark.parametrize(
    "value, expected",
    [(1, 1.0), (2.5, 2.5), (True, 1.0), ("1", None), (None, None), (10**400, None)],
)
def test_to_float(value: Any, expected: float | None) -> None:
    assert to_float(value) == expected


def test_to_float_of_a_scalar_with_item() -> None:
    class Scalar:
        def item(self) -> float:
            return 4.5

    class Broken:
        def item(self) -> float:
            raise RuntimeError("not a scalar")

    assert to_float(Scalar()) == 4.5
    assert to_float(Broken()) is None
