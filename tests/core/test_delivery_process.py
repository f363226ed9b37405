"""Delivery in a helper process: where the trackers' code runs, how the two processes talk, and
what happens when either of them dies."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.core.conftest import make_dist
from tests.helpers.subprocess_python import JOBS, run_python
from tests.helpers.tb_events import read_run

# A backend installed as a real distribution (so a new interpreter finds it), recording where
# each call ran (see the job file).
PROBE = (JOBS / "delivery_process_probe.py").read_text(encoding="utf-8")


@pytest.fixture
def probe(site: Path, tmp_path: Path) -> dict[str, str]:
    make_dist(site, "probe-tracking", {"probe": "probe_plugin"}, {"probe_plugin": PROBE})
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return {"PROBE_OUT": str(tmp_path / "probe.jsonl"), "PYTHONPATH": path}


def _calls(env: dict[str, str]) -> list[dict]:
    path = Path(env["PROBE_OUT"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _metric_counts(calls: list[dict]) -> Counter:
    return Counter((c["name"], c["step"]) for c in calls if "name" in c)


def test_trackers_run_in_a_delivery_process(probe: dict[str, str], tmp_path: Path) -> None:
    out = run_python(
        JOBS / "delivery_process_two_writers.py",
        args=[tmp_path],
        env=probe,
    )
    first, second = out.stdout.splitlines()
    training = int(first.split()[0])
    assert first.split()[1:] == ["0", "True"]  # the primary logged no metric itself
    assert second == "[]"  # the trackers' code was never imported by the training process
    calls = _calls(probe)
    opened = [c for c in calls if "open" in c or "attach" in c]
    assert len(opened) == 2 and all(c["training"] == training for c in opened)
    helpers = {c.get("open") or c.get("attach") for c in opened} | {c["pid"] for c in calls if "pid" in c}
    assert training not in helpers and len(helpers) == 2  # one delivery process per writer
    assert _metric_counts(calls) == Counter({("actor/loss", s): 1 for s in range(200)})
    assert [c["close"] for c in calls if "close" in c] == ["FINISHED", "FINISHED"]
    run_dir = next((tmp_path / "tensorboard").iterdir())
    points = read_run(run_dir / "actor").scalars["loss"]  # role runs hold unprefixed tags
    assert [step for step, _ in points] == list(range(200))


def test_thread_delivery_on_request_and_clear_errors(probe: dict[str, str], tmp_path: Path) -> None:
    out = run_python(
        JOBS / "delivery_process_thread.py",
        args=[tmp_path],
        env=probe,
    )
    lines = out.stdout.splitlines()
    training = int(lines[0])
    assert {c["pid"] for c in _calls(probe) if "pid" in c} == {training}
    assert "registered at run time rather than through an entry point" in lines[1]
    assert "delivery='thread'" in lines[1]
    assert lines[2] == "AUTO ThreadDelivery"
    assert "delivery= (--tracking-delivery) is 'fork'; use one of: process, thread" in lines[3]


def test_a_delivery_process_that_cannot_start_falls_back_to_threads(probe: dict[str, str], tmp_path: Path) -> None:
    out = run_python(
        JOBS / "delivery_process_no_interpreter.py",
        args=[tmp_path],
        env=probe,
    )
    assert "delivering on threads of this process instead" in out.stderr
    assert {c["pid"] for c in _calls(probe) if "pid" in c} == {int(out.stdout)}


def test_warnings_of_the_delivery_process_go_through_the_training_process_logging(
    probe: dict[str, str], tmp_path: Path
) -> None:
    out = run_python(
        JOBS / "delivery_process_warnings.py",
        args=[tmp_path],
        env={**probe, "PROBE_FAIL_ONCE": "1"},
    )
    assert (
        "TRAINING-LOG tracking_core.delivery: backend 'probe' failed in log_metrics"
        ": ConnectionResetError: probe tracker hiccup;" in out.stderr
    )
    assert out.stdout.strip() == "{'log_metrics: ConnectionResetError': 1}"
    assert _metric_counts(_calls(probe)) == Counter({("x", s): 1 for s in range(20)})


KILL_HELPERS = JOBS / "delivery_process_kill_helpers.py"


@pytest.mark.slow
def test_a_killed_delivery_process_is_started_again_and_resumes(probe: dict[str, str], tmp_path: Path) -> None:
    out = run_python(KILL_HELPERS, args=[tmp_path, "2"], env=probe)
    assert out.stderr.count("delivery process for the driver (primary-p") == 2, out.stderr
    assert out.stderr.count("ended unexpectedly (SIGKILL); starting it again") == 2, out.stderr
    assert "starting it again (2 of 3): it resumes from the journal" in out.stderr
    assert out.stdout.startswith("run FINISHED; probe: 400 of 400 values delivered") and "sync" not in out.stdout
    calls = _calls(probe)
    assert _metric_counts(calls) == Counter({("x", s): 1 for s in range(400)})
    assert len([c for c in calls if "attach" in c]) == 2  # each new one joined the open run
    assert not (tmp_path / "journal").exists()


@pytest.mark.slow
def test_a_delivery_process_that_keeps_dying_leaves_the_rest_to_sync(probe: dict[str, str], tmp_path: Path) -> None:
    out = run_python(KILL_HELPERS, args=[tmp_path, "4"], env=probe)
    assert "ended unexpectedly (SIGKILL) after 3 restarts" in out.stderr
    assert re.search(r"run `\S*tracking-core sync \S+`", out.stdout)  # the command, runnable as printed
    before = _metric_counts(_calls(probe))
    assert set(range(351)) <= {step for _, step in before} and len(before) < 400
    sync = subprocess.run(
        [sys.executable, "-m", "tracking_core.cli", "sync", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, **probe},
        timeout=120,
    )
    assert sync.returncode == 0, sync.stderr
    assert _metric_counts(_calls(probe)) == Counter({("x", s): 1 for s in range(400)})


@pytest.mark.slow
def test_sigterm_to_the_process_group_does_not_cut_delivery_short(
    probe: dict[str, str], tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(JOBS / "delivery_process_until_killed.py"), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **probe},
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    os.killpg(proc.pid, signal.SIGTERM)  # what a job scheduler or Ctrl-C does to the job's group
    assert proc.wait(60) == -signal.SIGTERM
    calls = _calls(probe)
    steps = sorted(step for _, step in _metric_counts(calls))
    assert steps == list(range(len(steps))) and len(steps) > 300  # all of it, no gap
    assert [c["close"] for c in calls if "close" in c] == ["KILLED"]
    assert not (tmp_path / "journal").exists()  # complete: removed


def test_whether_training_is_gone_is_asked_from_two_threads_at_once() -> None:
    """A finish's answer asks while the main loop asks (they share one pidfd poll): neither
    may raise. The answer to a finish raised ``RuntimeError: concurrent poll() invocation`` in
    the main thread, which then ended the process with SIGABRT at its shutdown."""
    from tracking_core.delivery.process import Training

    pidfd = os.pidfd_open(os.getpid())
    training = Training({"pid": os.getpid(), "pidfd": pidfd})
    errors: list[BaseException] = []
    stop = threading.Event()

    def ask() -> None:
        try:
            while not stop.is_set():
                assert training.gone() is False  # this process is alive
        except BaseException as exc:  # noqa: BLE001 - what the test looks for
            errors.append(exc)
            stop.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can
    threads = [threading.Thread(target=ask) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        stop.wait(1.0)  # before the fix: fails within milliseconds
        stop.set()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
        os.close(pidfd)
    assert not errors, errors[0]


@pytest.mark.slow
@pytest.mark.parametrize("crash", ["signal", "fatal error"])
def test_a_crash_outside_any_tracker_call_names_the_process_and_blames_no_tracker(
    probe: dict[str, str], tmp_path: Path, crash: str
) -> None:
    """The delivery process dies of SIGABRT while the tracker is in a call on its own thread,
    but on another thread: a SIGABRT sent to it (its main thread takes it; faulthandler reports
    it), or the interpreter's own fatal error (it disables faulthandler and writes its report to
    the process's log: how the race of the main loop and a finish's answer ended it). The
    warning names the process (role, rank, label), the signal and where it was, charges no
    tracker, and the restarted process delivers everything."""
    hold = tmp_path / "hold"
    hold.touch()
    out = run_python(
        JOBS / "delivery_process_crash.py",
        args=[tmp_path, crash],
        env={**probe, "PROBE_HOLD": str(hold), "PROBE_FATAL": "1" if crash == "fatal error" else ""},
    )
    described, label = out.stdout.splitlines()[:2]
    ended = [line for line in out.stderr.splitlines() if "delivery process" in line and "ended" in line]
    assert len(ended) == 1, out.stderr
    assert f"for actor rank 0 ({label})" in ended[0], ended[0]
    assert "(SIGABRT, outside any tracker call: " in ended[0] and "no tracker is blamed" in ended[0], ended[0]
    if crash == "fatal error":
        assert "Fatal Python error: probe: a fatal error outside any call" in ended[0], ended[0]
    assert "tracker 'probe'" not in ended[0] and "for tracker" not in ended[0], ended[0]
    assert described.startswith("run FINISHED; probe: 100 of 100 values delivered"), described
    assert _metric_counts(_calls(probe)) >= Counter({("actor/x", s): 1 for s in range(100)})
