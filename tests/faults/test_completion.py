"""Defect 2: a journal is removed only when every backend acknowledged every metric record,
every config section and the close; the finish summary says what is missing where, and
``tracking-core sync`` delivers exactly that (and only that)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.conftest import Faults, explain_sync, journal_files, once, sync
from tests.helpers.subprocess_python import JOBS

CLOSE_JOB = JOBS / "completion_close.py"


@pytest.mark.slow
def test_a_close_that_always_fails_keeps_the_journal_and_sync_retries_it(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    job = jobs(CLOSE_JOB, faults.env(FAULT_FAIL_CLOSE="1"), args=[td]).wait()
    summary = job.result["summary"]
    assert job.result["took"] < 6
    assert summary["status"] == "FINISHED"
    assert faults.metrics() == once(["loss"], range(50))
    assert faults.events("close") == []
    # Not complete: the journal stays, and the summary names the backend and what it lacks.
    assert summary["journal"] and Path(summary["journal"]).exists(), summary["describe"]
    assert summary["drained"] is False
    assert summary["backends"]["faulty"]["closed"] is False
    assert summary["backends"]["faulty"]["delivered"] == 50
    assert summary["backends"]["faulty"]["undelivered"] == 0
    assert summary["backends"]["steady"]["closed"] is True
    assert "faulty" in summary["describe"] and "close" in summary["describe"]

    still = sync(td, faults.env(FAULT_FAIL_CLOSE="1"))  # the close still fails: kept, an error
    assert still.returncode == 1, explain_sync(still)
    assert journal_files(td), "the journal went although the close was never acknowledged"

    done = sync(td, faults.env())
    assert done.returncode == 0, explain_sync(done)
    assert [c["status"] for c in faults.events("close")] == ["FINISHED"]
    # Only what was missing was replayed: no metric, config or close sent twice anywhere.
    for backend in ("faulty", "steady"):
        assert faults.metrics(backend, raw=True) == once(["loss"], range(50)), backend
        assert len(faults.events("config", backend)) == 1, backend
        assert len(faults.events("close", backend)) == 1, backend
    assert journal_files(td) == []


CONFIG_JOB = JOBS / "completion_config.py"


@pytest.mark.slow
def test_a_config_that_always_fails_is_reported_kept_and_synced_without_holding_up_metrics(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    job = jobs(CONFIG_JOB, faults.env(FAULT_FAIL_CONFIG="critic"), args=[td]).wait()
    critic = job.result["critic"]
    assert job.result["took"] < 6
    # The metrics logged after the refused config were not held up by it.
    assert faults.metrics() == once(["critic/value_loss"], range(30))
    assert [c["namespace"] for c in faults.events("config")] == ["launch"]
    assert sorted(c["namespace"] for c in faults.events("config", "steady")) == ["critic", "launch"]
    faulty = critic["backends"]["faulty"]
    assert faulty["missing_configs"] == ["critic"]
    assert faulty["delivered"] == 30 and faulty["undelivered"] == 0
    assert critic["backends"]["steady"]["missing_configs"] == []
    assert critic["journal"] and Path(critic["journal"]).exists(), critic["describe"]
    assert "critic" in critic["describe"] and "faulty" in critic["describe"]
    assert job.result["primary"]["backends"]["faulty"]["closed"] is True

    still = sync(td, faults.env(FAULT_FAIL_CONFIG="critic"))  # still refused: kept, an error
    assert still.returncode == 1, explain_sync(still)
    assert "critic" in still.stderr or "config" in still.stderr, explain_sync(still)
    assert journal_files(td), "the journal went although the config was never acknowledged"

    # A slow attach: sync's drain must wait for the call in flight, not take it for a failure.
    done = sync(td, faults.env(FAULT_SLOW_CONNECT="1"))
    assert done.returncode == 0, explain_sync(done)
    assert sorted(c["namespace"] for c in faults.events("config")) == ["critic", "launch"]
    assert len(faults.events("config", "steady")) == 2  # not sent again where it had arrived
    assert faults.metrics(raw=True) == once(["critic/value_loss"], range(30))
    assert journal_files(td) == []


OUTAGE_JOB = JOBS / "completion_outage.py"


@pytest.mark.slow
def test_a_config_logged_during_an_outage_reaches_the_tracker_when_it_is_back(
    faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    job = jobs(OUTAGE_JOB, faults.env(), args=[td]).wait(120)
    result = job.result
    assert result["flushed"] is True
    assert [c for c in faults.calls() if c.get("ev") == "refused"], "the outage was never seen"
    configs = faults.events("config")
    assert len(configs) == 1 and configs[0]["params"].get("late_lr") == 0.5, configs
    assert faults.metrics() == once(["loss"], range(result["steps"]))
    assert [c["status"] for c in faults.events("close")] == ["FINISHED"]
    summary = result["summary"]
    assert summary["drained"] is True and summary["journal"] is None, summary["describe"]
    assert summary["backends"]["faulty"]["missing_configs"] == []
    assert journal_files(td) == []
