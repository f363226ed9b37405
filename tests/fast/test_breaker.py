"""The breaker: failures in a row, the open circuit, 'is back after', each failure said once;
and a failure's cause in a few words."""

from __future__ import annotations

import logging

import pytest

from tests.fast.fakes import FakeClock
from tracking_core.delivery.failures import (
    BREAKER_THRESHOLD,
    Breaker,
    cause_of,
    failure,
    reported,
)


def breaker() -> tuple[Breaker, FakeClock]:
    clock = FakeClock()
    return Breaker("fake", clock), clock


def test_a_new_breaker_is_closed() -> None:
    b, _ = breaker()
    assert (b.open, b.streak, b.attempts, b.down_since) == (False, 0, 0, None)


@pytest.mark.parametrize("failures, is_open", [(1, False), (2, False), (3, True), (4, True)])
def test_the_circuit_opens_at_the_threshold(failures: int, is_open: bool) -> None:
    b, _ = breaker()
    for _ in range(failures):
        b.failed()
    assert b.open is is_open
    assert b.streak == failures


def test_the_threshold_is_three() -> None:
    assert BREAKER_THRESHOLD == 3


def test_a_judged_outage_opens_it_at_once() -> None:
    b, clock = breaker()
    b.failed(BREAKER_THRESHOLD)
    assert b.open and b.down_since == clock.now


def test_down_since_is_when_it_opened_not_the_first_failure() -> None:
    b, clock = breaker()
    b.failed()
    clock.advance(5)
    b.failed()
    clock.advance(5)
    b.failed()
    assert b.down_since == 1010.0
    clock.advance(5)
    b.failed()
    assert b.down_since == 1010.0  # a failure of an open circuit changes nothing


def test_a_success_closes_it_and_says_how_long_it_was_down(caplog: pytest.LogCaptureFixture) -> None:
    b, clock = breaker()
    b.failed(3)
    clock.advance(12.34)
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        b.succeeded()
    assert [r.getMessage() for r in caplog.records] == ["backend 'fake' is back after 12.3 s; delivering what it missed"]
    assert (b.open, b.streak, b.down_since) == (False, 0, None)


def test_a_success_before_the_circuit_opened_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    b, _ = breaker()
    b.failed(2)
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        b.succeeded()
    assert caplog.records == []
    assert b.streak == 0


def test_a_quiet_success_closes_it_without_a_word(caplog: pytest.LogCaptureFixture) -> None:
    b, _ = breaker()
    b.failed(3)
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        b.succeeded(quietly=True)
    assert caplog.records == []
    assert (b.open, b.down_since) == (False, None)


def test_opening_is_said_once_at_info(caplog: pytest.LogCaptureFixture) -> None:
    b, _ = breaker()
    with caplog.at_level(logging.INFO, logger="tracking_core.delivery"):
        for _ in range(6):
            b.failed()
    said = [r for r in caplog.records if "in a row" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO
    assert "failed 3 times in a row" in said[0].getMessage()


def test_each_kind_of_failure_is_said_once_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    b, _ = breaker()
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        for _ in range(3):
            b.record("log_metrics", ConnectionError("refused"))
        b.record("log_metrics", TimeoutError("slow"))
    assert b.counts == {"log_metrics: ConnectionError": 3, "log_metrics: TimeoutError": 1}
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2


def test_a_failure_says_what_happens_next(caplog: pytest.LogCaptureFixture) -> None:
    b, _ = breaker()
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        b.record("publish_writer", OSError("x"), "no record waits for it")
    text = caplog.records[0].getMessage()
    assert text.startswith("backend 'fake' failed in publish_writer: OSError: x; training goes on, no record waits for it")


def test_the_same_cause_in_another_hook_is_only_counted(caplog: pytest.LogCaptureFixture) -> None:
    b, _ = breaker()
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        b.record("log_metrics", ConnectionError("down"))
        b.record("close_run", ConnectionError("down"))
    assert len(caplog.records) == 1
    assert reported() == ["fake failed: ConnectionError: down (reported 2x: close_run, log_metrics)"]


@pytest.mark.parametrize(
    "exc, cause",
    [
        (ValueError("bad value"), "ValueError: bad value"),
        (ValueError(""), "ValueError"),
        (ValueError("first line\nsecond line"), "ValueError: first line"),
        (
            ConnectionError("HTTPConnectionPool(host='tracker', port=5000): [Errno 111] Connection refused"),
            "ConnectionError: Connection refused (tracker:5000)",
        ),
        (OSError("[Errno 28] No space left on device"), "OSError: No space left on device"),
        (RuntimeError("see https://tracker.example/api/runs?id=1 now"), "RuntimeError: see https://tracker.example now"),
        (KeyError("run 0123456789abcdef gone"), "KeyError: 'run … gone'"),
    ],
)
def test_cause_of_keeps_what_identifies_a_failure(exc: BaseException, cause: str) -> None:
    assert cause_of(exc) == cause


def test_a_long_cause_is_cut() -> None:
    cause = cause_of(ValueError("x" * 500))
    assert len(cause) == len("ValueError: ") + 160
    assert cause.endswith("…")


def test_failure_extra_and_its_way_back(caplog: pytest.LogCaptureFixture) -> None:
    from tracking_core.delivery.messages import Log

    extra = failure("fake", "log_metrics", ValueError("bad"))
    assert extra == {"tc_failure": {"backend": "fake", "hook": "log_metrics", "cause": "ValueError: bad"}}
    with caplog.at_level(logging.WARNING, logger="tracking_core.delivery"):
        Log("tracking_core.delivery", logging.WARNING, "said", extra["tc_failure"]).emit()
        Log("tracking_core.delivery", logging.WARNING, "said again", extra["tc_failure"]).emit()
        Log("tracking_core.delivery", logging.WARNING, "no failure").emit()
    assert [r.getMessage() for r in caplog.records] == ["said", "no failure"]  # a cause is said once
