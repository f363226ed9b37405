"""The messages between a training process, its delivery process and the keeper: each type
survives its wire form, and the keeper (standard library only) writes what the others read."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tracking_core.delivery import messages as m
from tracking_core.delivery.client import KEEPER
from tracking_core.delivery.progress import BackendProgress, Progress

SAMPLES = [
    m.Start(plan={"folder": None}, log_level=20, argv=["train.py"], crash_fd=5, training={"pid": 1, "pidfd": None}),
    m.Start(plan={"folder": "/j"}, log_level=30, argv=["tracking-core", "sync"], lock_fd=7),
    m.Feed(("records", [{"n": 3}])),
    m.Drain(1, 41, None),
    m.Finish(2, 42, 4.7),
    m.Replay(1, 30.0),
    m.Stop(),
    m.Ready(123),
    m.Opened("mlflow", {"run_id": "abc"}),
    m.Call("mlflow", "log_metrics", 140),
    m.Call("mlflow", None, 140),
    m.Report({"outstanding": {}}),
    m.Done(2, True, {"outstanding": {}}),
    m.Done(1, False),
    m.Log("tracking_core.delivery", 30, "down", {"backend": "mlflow"}),
    m.Progressed({"mlflow": BackendProgress(5, 4, 1, [2]).to_dict()}),
    m.Started(10, 9),
    m.Exited(-6),
]


@pytest.mark.parametrize("message", SAMPLES, ids=lambda x: type(x).__name__)
def test_each_message_reads_back_as_it_was_sent(message: object) -> None:
    obj = json.loads(m.line(message))  # type: ignore[arg-type]
    if isinstance(message, m.Start):
        back: object = m.Start.decode(obj)
    elif "op" in obj:
        back = m.decode_request(obj)
    else:
        back = m.decode_event(obj)
    assert back == message


def test_a_message_of_another_version_is_none_not_an_error() -> None:
    assert m.decode_event({"ev": "something-new"}) is None
    assert m.decode_request({"op": "something-new"}) is None


def test_the_keeper_says_what_the_training_process_reads() -> None:
    proc = subprocess.run([sys.executable, "-I", "-S", KEEPER, sys.executable, "-c", "raise SystemExit(3)"],
                          capture_output=True, timeout=30)
    # The keeper's child holds the pipe until the command ended: its two lines are all there.
    started, exited = [m.decode_event(json.loads(ln)) for ln in proc.stdout.splitlines() if ln.strip()]
    assert isinstance(started, m.Started) and started.pid > 0
    assert exited == m.Exited(3)


def test_the_completion_rule_counts_an_owed_config_and_every_backend() -> None:
    acks = {"a": BackendProgress(n=9, owed=[4]), "b": BackendProgress(n=9)}
    progress = Progress(acks, ["a", "b", "c"])
    assert progress.outstanding(9) == {"a": "1 config section(s)", "c": "records 0..9 (the close included)"}
    assert not progress.done("a", 4) and progress.done("a", 5) and acks["a"].reached(9)
    assert acks["a"].closed(9) and not acks["a"].closed(None)
    assert progress.done_through() == 3  # the owed section keeps its segment
    assert not progress.reached(9)  # "c" has acknowledged nothing
    assert Progress(acks, ["a", "b"]).reached(9)  # owed: a wait brings nothing more
    assert Progress(acks, ["b"]).complete(9)
