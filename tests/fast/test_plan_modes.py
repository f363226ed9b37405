"""The plan that crosses to a delivery process as one JSON line, and where delivery runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fast.fakes import FakeTracker, context, manager_with, plan_for
from tracking_core import settings
from tracking_core.delivery.modes import DeliveryUnavailable, ThreadDelivery, delivery_mode
from tracking_core.delivery.plan import BackendPlan, Plan, context_from_dict, context_to_dict, plain
from tracking_core.records import RunStatus


@pytest.mark.parametrize(
    "value, expected",
    [
        ({"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 2]}),
        ((1, 2), [1, 2]),
        (Path("/x"), "/x"),
        ({"p": Path("/y")}, {"p": "/y"}),
        (None, None),
    ],
)
def test_plain_is_json_data(value: Any, expected: Any) -> None:
    assert plain(value) == expected


def test_plain_of_a_loop_is_its_str() -> None:
    loop: list[Any] = []
    loop.append(loop)
    assert plain(loop) == "[[...]]"


def test_a_context_crosses_as_plain_data_and_back() -> None:
    ctx = context("mlflow", Path("/td"), role="actor", label="actor-r1", rank=1, options={"uri": "http://x"}, tags={"k": "v"}, resume=True, started_at=5.0)
    data = context_to_dict(ctx)
    assert json.loads(json.dumps(data)) == data
    assert context_from_dict(data) == ctx


def test_a_plan_crosses_as_one_json_line_and_back() -> None:
    plan = plan_for(["a", "b"], Path("/j"), handle_file="/h.json", left_out={"c": "why"}, replay=True, terminal=True)
    plan.backends[1].pending = True
    plan.backends[1].writer = {"label": "actor-r0"}
    text = plan.to_json()
    assert "\n" not in text
    again = Plan.from_dict(json.loads(text))
    assert again == plan
    assert isinstance(again.backends[0], BackendPlan)


def test_a_plan_with_no_backends() -> None:
    assert Plan.from_dict({"folder": None, "prefix": "x/"}) == Plan(None, "x/")


def test_a_plan_is_delivered_whole_by_its_follower() -> None:
    tracker = FakeTracker()
    plan = plan_for(["fake"], action="attach", poll=0.01)
    delivery = ThreadDelivery(plan, manager_with({"fake": tracker}), lambda name, result: None)
    worker = delivery.follower.workers["fake"]
    assert (worker.plan, worker.backend) == (plan, plan.backends[0])
    delivery.feed(("records", [{"n": 0, "t": "end", "status": "FINISHED", "ts": 1.0}]))
    report = delivery.finish(0, 5.0)
    assert tracker.attached == [{"where": "fake"}] and tracker.closed == [RunStatus.FINISHED]
    assert report["outstanding"] == {}


@pytest.mark.parametrize("explicit", ["thread", "THREAD"])
def test_thread_when_asked(explicit: str) -> None:
    manager = manager_with({"fake": FakeTracker()})
    assert delivery_mode(explicit, manager.select(["fake"]), manager) == "thread"


def test_thread_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.DELIVERY, "thread")
    manager = manager_with({"fake": FakeTracker()})
    assert delivery_mode(None, manager.select(["fake"]), manager) == "thread"


def test_thread_with_no_backends() -> None:
    assert delivery_mode(None, [], manager_with({})) == "thread"


def test_an_unknown_mode_is_an_error_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="'fork'; use one of: process, thread"):
        delivery_mode("fork", [], manager_with({}))


def test_a_backend_registered_at_run_time_cannot_go_to_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.DELIVERY, raising=False)
    manager = manager_with({"fake": FakeTracker()})
    specs = manager.select(["fake"])
    assert delivery_mode(None, specs, manager) == "thread"
    with pytest.raises(DeliveryUnavailable, match="registered at run time"):
        delivery_mode("process", specs, manager)


def test_an_interpreter_without_its_executable_delivers_on_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "")
    manager = manager_with({"fake": FakeTracker()})
    with pytest.raises(DeliveryUnavailable, match="sys.executable is empty"):
        delivery_mode("process", manager.select(["fake"]), manager)
