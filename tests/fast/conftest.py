"""Every fast test starts with no failure cause said yet (see tracking_core.delivery.failures)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tracking_core.delivery import failures


@pytest.fixture(autouse=True)
def fresh_failure_causes() -> Iterator[None]:
    failures.forget()
    yield
    failures.forget()
