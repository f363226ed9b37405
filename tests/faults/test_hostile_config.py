"""Defect 6: a host config the trackers choke on -- a cyclic dict, an object whose ``repr``
raises, a generator, a lambda, tensors -- passed as ``args`` and ``config`` to ``start_run``
and ``attach``, and to ``log_config``. Nothing raises, the delivery process stays up (only
plain, converted data crosses to it), and the run works."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.conftest import Faults, journal_files, once

JOB = """
import argparse, sys
import torch
import tracking_core


class Hostile:
    def __repr__(self):
        raise RuntimeError("this object refuses to be printed")

    __str__ = __repr__


def stream():
    yield 1


cyclic = {"depth": 1}
cyclic["self"] = cyclic
nested = [cyclic, {"inner": cyclic}]
args = argparse.Namespace(
    lr=0.1, cyclic=cyclic, nested=nested, hostile=Hostile(), stream=stream(),
    schedule=lambda step: step * 2, weights=torch.ones(2, 3), scale=torch.tensor(0.5),
)
role_config = {"lr": 0.2, "cyclic": cyclic, "hostile": Hostile(), "fn": lambda: None,
               "stream": stream(), "weights": torch.zeros(4)}
raised = []


def guard(what, fn):
    try:
        return fn()
    except BaseException as exc:
        raised.append(f"{what}: {exc!r}")


run = guard("start_run", lambda: tracking_core.start_run(
    backends=["faulty"], tracking_dir=sys.argv[1], args=args))
actor = guard("attach", lambda: tracking_core.attach(
    role="actor", writer=True, collect=False, args=args, config=role_config))
guard("log_config(Hostile())", lambda: run.log_config(Hostile()))
guard("log_config(cyclic)", lambda: actor.log_config(cyclic))
for step in range(20):
    guard("log_metrics", lambda: run.log_metrics({"x": float(step)}, step=step))
    guard("log_metrics", lambda: actor.log_metrics({"loss": step / 10}, step=step))
secondary = guard("actor.finish", lambda: actor.finish(timeout=20))
primary = guard("run.finish", lambda: run.finish(timeout=20))
report(raised=raised, secondary=summ(secondary), primary=summ(primary))
"""


@pytest.mark.slow
def test_a_hostile_host_config_never_raises_and_the_run_works(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    job = jobs(JOB, faults.env(), args=[td]).wait()
    result = job.result
    assert result["raised"] == []
    assert result["primary"]["status"] == "FINISHED"
    assert result["primary"]["drained"] is True, result["primary"]["describe"]
    assert result["secondary"]["drained"] is True, result["secondary"]["describe"]
    assert faults.metrics() == once(["x"], range(20)) + once(["actor/loss"], range(20))
    configs = faults.events("config")
    namespaces = sorted({c["namespace"] for c in configs})
    assert namespaces == ["actor", "launch"], configs
    # The plain parts of the config arrived as they were.
    assert any(c["params"].get("lr") == 0.1 for c in configs if c["namespace"] == "launch")
    assert any(c["params"].get("actor/lr") == 0.2 for c in configs if c["namespace"] == "actor")
    assert not [c for c in configs if "<unserialisable>" in c["params"]]
    assert [c["status"] for c in faults.events("close") if c["primary"]] == ["FINISHED"]
    assert "ended unexpectedly" not in job.stderr  # the delivery processes never died
    assert "Traceback" not in job.stderr, job.stderr[-4000:]
    assert journal_files(td) == []
