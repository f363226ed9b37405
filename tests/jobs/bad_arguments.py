"""Bad arguments to log_metrics, flush and finish (tests/faults/test_bad_arguments.py): what
raised (nothing should), what each flush returned, and the finish summary.

Usage: python bad_arguments.py TRACKING_DIR
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from fault_prelude import report, summ

import tracking_core


class LazyView(Mapping[str, float]):
    """Metrics read on demand, as a framework's lazy view is: reading one fails."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getitem__(self, key: str) -> float:
        raise self.error

    def __iter__(self) -> Iterator[str]:
        yield "x"
        raise self.error

    def __len__(self) -> int:
        return 1


class Items:
    def keys(self) -> list[str]:
        raise KeyError("no keys today")


run = tracking_core.start_run(backends=["faulty"], tracking_dir=sys.argv[1])
raised: list[str] = []
flushed: dict[str, Any] = {}


def guard(what: str, call: Callable[..., Any], *args: Any) -> Any:
    try:
        return call(*args)
    except BaseException as exc:
        raised.append(f"{what}: {exc!r}")
        return None


for step in range(10):
    guard("log_metrics", run.log_metrics, {"x": float(step)}, step)
    guard("lazy", run.log_metrics, LazyView(RuntimeError("view closed")), step)
    guard("lazy", run.log_metrics, LazyView(ZeroDivisionError("bad sum")), step)
    guard("keys", run.log_metrics, Items(), step)
timeouts: list[tuple[str, Any]] = [("str", "5"), ("neg", -1), ("nan", math.nan), ("none", None),
                                   ("inf", math.inf), ("word", "soon"), ("list", [1])]  # fmt: skip
for label, timeout in timeouts:
    flushed[label] = guard(f"flush({label})", run.flush, timeout)
summary = guard("finish", run.finish, "20")
report(raised=raised, flushed=flushed, summary=summ(summary))
