"""A host config the trackers choke on, passed to start_run, attach and log_config
(tests/faults/test_hostile_config.py): what raised (nothing should) and both finish summaries.

Usage: python hostile_config.py TRACKING_DIR
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from fault_prelude import report, summ

# isort: split
import torch

import tracking_core


class Hostile:
    def __repr__(self) -> NoReturn:
        raise RuntimeError("this object refuses to be printed")

    __str__ = __repr__


def stream() -> Iterator[int]:
    yield 1


cyclic: dict[str, Any] = {"depth": 1}
cyclic["self"] = cyclic
nested = [cyclic, {"inner": cyclic}]
args = argparse.Namespace(
    lr=0.1, cyclic=cyclic, nested=nested, hostile=Hostile(), stream=stream(),
    schedule=lambda step: step * 2, weights=torch.ones(2, 3), scale=torch.tensor(0.5),
)  # fmt: skip
role_config = {"lr": 0.2, "cyclic": cyclic, "hostile": Hostile(), "fn": lambda: None,
               "stream": stream(), "weights": torch.zeros(4)}  # fmt: skip
raised: list[str] = []


def guard(what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except BaseException as exc:
        raised.append(f"{what}: {exc!r}")
        return None


run = guard(
    "start_run", tracking_core.start_run, backends=["faulty"], tracking_dir=sys.argv[1], args=args
)
actor = guard(
    "attach",
    tracking_core.attach,
    role="actor",
    writer=True,
    collect=False,
    args=args,
    config=role_config,
)
guard("log_config(Hostile())", lambda: run.log_config(Hostile()))
guard("log_config(cyclic)", lambda: actor.log_config(cyclic))
for step in range(20):
    guard("log_metrics", lambda s: run.log_metrics({"x": float(s)}, step=s), step)
    guard("log_metrics", lambda s: actor.log_metrics({"loss": s / 10}, step=s), step)
secondary = guard("actor.finish", lambda: actor.finish(timeout=20))
primary = guard("run.finish", lambda: run.finish(timeout=20))
report(raised=raised, secondary=summ(secondary), primary=summ(primary))
