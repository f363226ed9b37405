"""A finish summary and the ``tracking-core sync`` after it count the same things the same way:
what the summary says a tracker lacks is, per tracker, what the sync then delivers to it plus
what that tracker rejects (values, tables, histograms and texts alike; configs are not values),
and the config sections it says are owed are those the sync says it delivered."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.conftest import Faults, explain_sync, once, run_job
from tests.faults.conftest import sync as run_sync
from tests.helpers.subprocess_python import JOBS

JOB = JOBS / "summary_counts.py"


def _lacks(summary: dict, name: str) -> int:
    return int(summary["backends"][name]["undelivered"])


def _synced(stdout: str, name: str) -> tuple[int, int]:
    found = re.search(rf"^  {name}: (\d+) values delivered(?:, (\d+) rejected by the tracker)?", stdout, re.M)
    assert found, stdout
    return int(found.group(1)), int(found.group(2) or 0)


def test_what_the_summary_says_is_missing_is_what_sync_delivers(faults: Faults, tmp_path: Path) -> None:
    faults.go_down()
    job = run_job(JOB, faults.env(), workdir=tmp_path, args=[tmp_path / "td"])
    summary = job.result["s"]
    assert _lacks(summary, "faulty") == 18 and _lacks(summary, "steady") == 0, summary["describe"]
    faults.come_back()
    done = run_sync(tmp_path / "td", faults.env())
    assert done.returncode == 0, explain_sync(done)
    assert _synced(done.stdout, "faulty") == (18, 0)
    assert not re.search(r"^  steady:", done.stdout, re.M), done.stdout  # it lacked nothing
    assert sum(faults.metrics("faulty").values()) == 15


def test_what_the_tracker_rejects_at_sync_is_said_beside_what_it_took(faults: Faults, tmp_path: Path) -> None:
    faults.go_down()
    job = run_job(JOB, faults.env(), workdir=tmp_path, args=[tmp_path / "td"])
    lacked = _lacks(job.result["s"], "faulty")
    faults.come_back()
    done = run_sync(tmp_path / "td", faults.env(FAULT_REJECT_KEY="tab"))  # the table is refused now
    assert done.returncode == 0, explain_sync(done)
    delivered, rejected = _synced(done.stdout, "faulty")
    assert (delivered, rejected) == (17, 1) and delivered + rejected == lacked, done.stdout


CONFIG_JOB = JOBS / "summary_counts_config.py"

SYNC_IN_PROCESS = JOBS / "summary_counts_sync.py"


@pytest.mark.parametrize("how", ["cli", "in-process"])
def test_a_config_section_the_summary_says_is_owed_is_what_sync_says_it_delivered(
    faults: Faults, tmp_path: Path, how: str
) -> None:
    td = tmp_path / "td"
    job = run_job(CONFIG_JOB, faults.env(FAULT_FAIL_CONFIG="critic"), workdir=tmp_path, args=[td])
    critic = job.result["critic"]
    assert "faulty: 3 of 3 values delivered, config critic NOT delivered" in critic["describe"], critic["describe"]
    owed = len(critic["backends"]["faulty"]["missing_configs"])
    assert owed == 1 and critic["backends"]["steady"]["missing_configs"] == [], critic["describe"]
    if how == "cli":
        done = run_sync(td, faults.env())
    else:
        done = subprocess.run(
            [sys.executable, str(SYNC_IN_PROCESS), str(td)], capture_output=True, text=True, env=faults.env(), timeout=180
        )
    assert done.returncode == 0, explain_sync(done)
    # Only the section was missing: sync says it delivered that, and no value.
    assert re.search(rf"^  faulty: 0 values delivered, {owed} config section\(s\) delivered$", done.stdout, re.M), done.stdout
    assert not re.search(r"^  steady:", done.stdout, re.M), done.stdout  # it lacked nothing
    assert [c["namespace"] for c in faults.events("config")].count("critic") == 1
    assert faults.metrics(raw=True) == once(["critic/value_loss"], range(3))


FLAT_OUT_JOB = JOBS / "summary_counts_flat_out.py"


@pytest.mark.parametrize("delivery", ["process", "thread"])
def test_after_logging_flat_out_the_summary_and_sync_count_alike(faults: Faults, tmp_path: Path, delivery: str) -> None:
    """Logging flat out into a tracker that takes 50 ms a batch: ``finish`` runs out of time
    with a batch in the tracker's hands. The summary must count that batch as sync will: what
    it says is NOT delivered is exactly what the sync delivers (and rejects) after it."""
    td = tmp_path / "td"
    env = faults.env(FAULT_COUNT_ONLY="1", FAULT_SLOW="0.05", TRACKING_CORE_DELIVERY=delivery)
    job = run_job(FLAT_OUT_JOB, env, workdir=tmp_path, args=[td, 0.7])
    summary = job.result["s"]
    lacked = _lacks(summary, "faulty")
    assert lacked > 0, summary["describe"]  # the run ended with values still to deliver
    delivered_live = sum(c["n"] for c in faults.events("batch"))
    done = run_sync(td, faults.env(FAULT_COUNT_ONLY="1"))
    assert done.returncode == 0, explain_sync(done)
    delivered, rejected = _synced(done.stdout, "faulty")
    assert delivered + rejected == lacked, (
        f"the summary said {lacked} NOT delivered, sync then delivered {delivered} and the tracker "
        f"rejected {rejected}: {summary['describe']}"
    )
    # and each value reached the tracker once: what the run delivered and what sync did
    assert delivered_live + delivered == summary["logged"], (delivered_live, delivered, summary["logged"])
