"""The incomplete block's headline counts the job as its details line does: the writers whose
journals a primary could not replay (still delivering at its close, or on another node) are
counted from what they said they logged and delivered."""

from __future__ import annotations

import re
from pathlib import Path

from tracking_core.handle import RunHandle
from tracking_core.records import RunStatus
from tracking_core.report import incomplete_block
from tracking_core.summary import FinishSummary


def test_writers_not_replayed_are_counted_in_the_headline_as_in_the_details(tmp_path: Path) -> None:
    summary = FinishSummary(
        status=RunStatus.FINISHED,
        drained=False,
        logged=5,
        backends={"mlflow": {"delivered": 0, "undelivered": 5, "rejected": 0, "closed": False}},
        job={"mlflow": {
            "actor-r0-p1": {"role": "actor", "journaled": 5, "delivered": 0},  # still delivering
            "critic-r0-p2": {"role": "critic", "journaled": 7, "delivered": 3},  # another node
        }},  # fmt: skip
    )
    handle = RunHandle(run_id="r1", name="r1", tracking_dir=str(tmp_path), backends={"mlflow": {}})
    block = incomplete_block(summary, handle, tmp_path)
    headline = re.search(r"^  mlflow: (\d+) of (\d+) values delivered", block, re.M)
    details = re.search(r"mlflow: (\d+) of (\d+) values delivered \(actor 0, critic 3; the driver 0\)", block)
    assert headline and details, block
    assert headline.groups() == details.groups() == ("3", "17"), block
