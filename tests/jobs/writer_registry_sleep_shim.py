"""Python's ``time.sleep`` made a ``select`` wait, on a node whose wall clock libfaketime skews
(tests/faults/test_writer_registry.py copies it as ``sitecustomize.py`` into a folder on the
node's ``PYTHONPATH``).

Python >= 3.11's ``time.sleep`` waits with ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)``,
which libfaketime 0.9.10 (Debian's) breaks when the monotonic clock is not faked: EINVAL
(wolfcw/libfaketime#426).
"""

from __future__ import annotations

import select
import time
from typing import SupportsIndex


def _sleep(seconds: float | SupportsIndex) -> None:
    seconds = float(seconds)
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], seconds)


time.sleep = _sleep
