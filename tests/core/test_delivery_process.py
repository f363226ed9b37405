"""Delivery in a helper process: where the trackers' code runs, how the two processes talk, and
what happens when either of them dies."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.core.conftest import make_dist
from tests.helpers.subprocess_python import run_python
from tests.helpers.tb_events import read_run

# A backend installed as a real distribution (so a new interpreter finds it), recording where
# each call ran into the file $PROBE_OUT. With $PROBE_FAIL_ONCE its first log_metrics raises;
# while the file $PROBE_HOLD exists, its first log_metrics removes it, says so and sleeps (with
# $PROBE_FATAL, a thread of its own meanwhile ends the process with a fatal error).
PROBE = """
    import ctypes, json, os, threading, time
    import tracking_core

    def _fatal():
        time.sleep(0.5)
        ctypes.pythonapi.Py_FatalError(b"probe: a fatal error outside any call")

    def _write(obj):
        with open(os.environ["PROBE_OUT"], "a") as fh:
            fh.write(json.dumps(obj) + "\\n")

    class Probe:
        def __init__(self, run):
            self.failed = False

        @tracking_core.hookimpl
        def open_run(self, run):
            _write({"open": os.getpid(), "training": run.pid})
            return {"probe": True}

        @tracking_core.hookimpl
        def attach_run(self, run, attach):
            _write({"attach": os.getpid(), "training": run.pid, "role": run.role})

        @tracking_core.hookimpl
        def log_metrics(self, records):
            hold = os.environ.get("PROBE_HOLD")
            if hold and os.path.exists(hold):
                os.remove(hold)
                _write({"holding": os.getpid(), "thread": threading.get_ident()})
                if os.environ.get("PROBE_FATAL"):
                    threading.Thread(target=_fatal, daemon=True).start()
                time.sleep(60)
            if os.environ.get("PROBE_FAIL_ONCE") and not self.failed:
                self.failed = True
                raise ConnectionResetError("probe tracker hiccup")
            for r in records:
                _write({"name": r.name, "step": r.step, "pid": os.getpid()})

        @tracking_core.hookimpl
        def close_run(self, status, run):
            _write({"close": status.value, "pid": os.getpid()})

    @tracking_core.hookimpl
    def register_backends(register):
        from tracking_core.plugin_api import Backend
        register(Backend("probe", Probe))
"""


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
        f"""
        import os, sys, tracking_core
        run = tracking_core.start_run(backends=["probe", "tensorboard"], tracking_dir={str(tmp_path)!r})
        child = tracking_core.attach(role="actor", writer=True, collect=False)
        for step in range(200):
            child.log_metrics({{"loss": step / 10}}, step=step, step_key="train/step")
        child.finish()
        summary = run.finish()
        print(os.getpid(), summary.backends["probe"]["delivered"], summary.drained)
        print(sorted(m for m in sys.modules if m.split(".")[0] == "tensorboardX"))
        """,
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
        f"""
        import os, tracking_core
        run = tracking_core.start_run(backends=["probe"], tracking_dir={str(tmp_path)!r}, delivery="thread")
        run.log_metrics({{"x": 1.0}}, step=0)
        run.finish()
        print(os.getpid())

        class Inline:
            def __init__(self, run):
                pass

            @tracking_core.hookimpl
            def log_metrics(self, records):
                pass

        class Registers:
            @tracking_core.hookimpl
            def register_backends(self, register):
                from tracking_core.plugin_api import Backend
                register(Backend("inline", Inline))

        tracking_core.get_plugin_manager().register(Registers(), "inline-plugin")
        try:
            tracking_core.start_run(backends=["inline"], tracking_dir={str(tmp_path)!r}, delivery="process")
        except tracking_core.DeliveryUnavailable as exc:
            print("ERROR", exc)
        auto = tracking_core.start_run(backends=["inline"], tracking_dir={str(tmp_path)!r})
        print("AUTO", type(auto._delivery).__name__)
        auto.finish()
        try:
            tracking_core.start_run(backends=["probe"], tracking_dir={str(tmp_path)!r}, delivery="fork")
        except ValueError as exc:
            print("ERROR", exc)
        """,
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
        f"""
        import os, sys, tracking_core
        sys.executable = "/bin/false"  # a broken interpreter path: the child dies at once
        run = tracking_core.start_run(backends=["probe"], tracking_dir={str(tmp_path)!r})
        run.log_metrics({{"x": 1.0}}, step=0)
        run.finish()
        print(os.getpid())
        """,
        env=probe,
    )
    assert "delivering on threads of this process instead" in out.stderr
    assert {c["pid"] for c in _calls(probe) if "pid" in c} == {int(out.stdout)}


def test_warnings_of_the_delivery_process_go_through_the_training_process_logging(
    probe: dict[str, str], tmp_path: Path
) -> None:
    out = run_python(
        f"""
        import logging, tracking_core
        logging.basicConfig(format="TRAINING-LOG %(name)s: %(message)s")
        run = tracking_core.start_run(backends=["probe"], tracking_dir={str(tmp_path)!r})
        for step in range(20):
            run.log_metrics({{"x": float(step)}}, step=step)
        summary = run.finish()
        print(summary.backends["probe"]["failures"])
        """,
        env={**probe, "PROBE_FAIL_ONCE": "1"},
    )
    assert (
        "TRAINING-LOG tracking_core.delivery: backend 'probe' failed in log_metrics"
        ": ConnectionResetError: probe tracker hiccup;" in out.stderr
    )
    assert out.stdout.strip() == "{'log_metrics: ConnectionResetError': 1}"
    assert _metric_counts(_calls(probe)) == Counter({("x", s): 1 for s in range(20)})


KILL_HELPERS = """
    import json, os, signal, time, tracking_core

    def helper():
        lines = [json.loads(line) for line in open(os.environ["PROBE_OUT"])]
        return [c.get("open") or c.get("attach") for c in lines if "open" in c or "attach" in c][-1]

    run = tracking_core.start_run(backends=["probe"], tracking_dir={tracking_dir!r})
    for step in range(400):
        run.log_metrics({{"x": float(step)}}, step=step)
        if step % 100 == 50 and step // 100 < {kills}:
            run.flush(30)
            killed = helper()
            os.kill(killed, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while step // 100 < 3 and helper() == killed and time.monotonic() < deadline:
                time.sleep(0.05)  # the next one attaches
        time.sleep(0.002)
    print(run.finish(timeout=10).describe())
"""


@pytest.mark.slow
def test_a_killed_delivery_process_is_started_again_and_resumes(probe: dict[str, str], tmp_path: Path) -> None:
    out = run_python(KILL_HELPERS.format(tracking_dir=str(tmp_path), kills=2), env=probe)
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
    out = run_python(KILL_HELPERS.format(tracking_dir=str(tmp_path), kills=4), env=probe)
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
    code = textwrap.dedent(
        f"""
        import time, tracking_core
        run = tracking_core.start_run(backends=["probe"], tracking_dir={str(tmp_path)!r})
        step = 0
        while True:
            run.log_metrics({{"x": float(step)}}, step=step)
            if step == 300:
                print("ready", flush=True)
            step += 1
            time.sleep(0.001)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
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
        f"""
        import json, os, signal, time, tracking_core
        run = tracking_core.start_run(backends=["probe"], tracking_dir={str(tmp_path)!r})
        actor = tracking_core.attach(role="actor", writer=True, collect=False)
        for step in range(50):
            actor.log_metrics({{"x": float(step)}}, step=step)
        deadline = time.monotonic() + 60
        holding = None
        while holding is None and time.monotonic() < deadline:
            if os.path.exists(os.environ["PROBE_OUT"]):
                for line in open(os.environ["PROBE_OUT"]):
                    holding = json.loads(line).get("holding") or holding
            time.sleep(0.05)
        if {crash!r} == "signal":
            os.kill(holding, signal.SIGABRT)
        for step in range(50, 100):
            actor.log_metrics({{"x": float(step)}}, step=step)
        print(actor.finish(timeout=30).describe())
        print(actor.label)
        run.finish()
        """,
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
