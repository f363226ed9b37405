"""The pipe between a training process and its delivery process: each message as one line of
its fields by name, read back equal; what this version does not know is None."""

from __future__ import annotations

import json

import pytest

from tracking_core.delivery import messages as m


@pytest.mark.parametrize(
    "message, wire",
    [
        (m.Drain(1, 41, None), {"op": "drain", "id": 1, "target": 41, "timeout": None}),
        (m.Finish(2, 42, 4.5), {"op": "finish", "id": 2, "end": 42, "timeout": 4.5}),
        (m.Replay(3, 30.0), {"op": "replay", "id": 3, "timeout": 30.0}),
        (m.Stop(), {"op": "stop"}),
        (m.Feed(("records", [{"n": 3}])), {"op": "feed", "message": ["records", [{"n": 3}]]}),
        (m.Ready(7), {"ev": "ready", "pid": 7}),
        (m.Call("fake", "log_metrics", 9), {"ev": "call", "backend": "fake", "hook": "log_metrics", "thread": 9}),
        (m.Started(10, 9), {"ev": "started", "pid": 10, "keeper": 9}),
        (m.Exited(-6), {"ev": "exited", "code": -6}),
        (m.Done(2, True), {"ev": "done", "id": 2, "ok": True, "report": None}),
    ],
)
def test_a_message_is_its_fields_and_its_type(message: object, wire: dict) -> None:  # type: ignore[type-arg]
    data = m.line(message)  # type: ignore[arg-type]
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert json.loads(data) == wire
    back = m.decode_request(wire) if "op" in wire else m.decode_event(wire)
    assert back == message


def test_start_has_no_type_and_reads_back() -> None:
    start = m.Start(plan={"folder": "/j"}, log_level=20, argv=["train.py"], lock_fd=7)
    obj = json.loads(m.line(start))
    assert "op" not in obj and "ev" not in obj
    assert m.Start.decode(obj) == start


def test_the_keepers_own_lines_read_as_events() -> None:
    assert m.decode_event({"ev": "started", "pid": 5, "keeper": 4}) == m.Started(5, 4)
    assert m.decode_event({"ev": "exited", "code": 0}) == m.Exited(0)


@pytest.mark.parametrize("obj", [{"ev": "news"}, {"ev": None}, {}])
def test_an_unknown_event_is_none(obj: dict) -> None:  # type: ignore[type-arg]
    assert m.decode_event(obj) is None


@pytest.mark.parametrize("obj", [{"op": "rewind"}, {}])
def test_an_unknown_request_is_none(obj: dict) -> None:  # type: ignore[type-arg]
    assert m.decode_request(obj) is None


def test_a_feed_from_the_wire_is_a_message_tuple() -> None:
    feed = m.decode_request({"op": "feed", "message": ["records", []]})
    assert isinstance(feed, m.Feed) and feed.message == ("records", [])
