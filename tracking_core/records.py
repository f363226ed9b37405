"""The data that crosses the hook contract: metric records, config sections, run status.

Everything here is plain and picklable, so the same objects can be journaled, replayed and sent
to a backend's worker without conversion.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class RunStatus(str, enum.Enum):
    """How a run ended. Backends map these onto their own states."""

    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


@dataclass(frozen=True, slots=True)
class MetricRecord:
    """One metric value, as logged.

    ``key`` is the name the caller logged (``train/pg_loss``); ``prefix`` is what the key
    convention puts before it for this role (``"actor/"``, or ``""`` when the host already names
    its metrics per role). ``name`` is the flat name backends without a native place for the role
    use. ``step_key`` names the step axis (``train/step``); ``timestamp`` is fixed when the value
    was logged, so a retried or replayed record is the same record. ``seq`` is unique within the
    writing process and orders its records.
    """

    key: str
    value: float
    step: int | None
    timestamp: float
    seq: int
    role: str | None = None
    prefix: str = ""
    step_key: str | None = None

    @property
    def name(self) -> str:
        return self.prefix + self.key

    @property
    def axis(self) -> str | None:
        """The flat name of the step axis, prefixed like the metric."""
        return None if self.step_key is None else self.prefix + self.step_key


@dataclass(frozen=True)
class ConfigSection:
    """One namespace of config: the launch config (``role`` None) or one role's effective config.

    ``values`` is the complete, converted and redacted config of the namespace (plain JSON data,
    nested values kept as values). ``params`` holds the flat, prefixed keys a backend shows as
    parameters (``actor/lr``, ``prefix`` being ``"actor/"``); it is empty when the key style sends the namespace only to its JSON
    artifact. ``namespace`` names the artifact (``launch``, ``actor``). ``report`` lists what the
    pipeline changed on the way (lossy conversions, redactions, collector conflicts) so a backend
    can store it beside the config.
    """

    role: str | None
    namespace: str
    prefix: str
    values: Mapping[str, Any]
    params: Mapping[str, Any]
    report: Mapping[str, Any] = field(default_factory=dict)
