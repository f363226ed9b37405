"""Tables, histograms, texts and artifacts take the same path as metrics: journaled, delivered by
the same worker (retries, isolation, fallbacks), replayed by ``sync`` exactly once, and never a
fault in the training loop. Artifacts are delivered as they were when logged, whatever the job
does to the file right after ``log_artifact`` returns.

Jobs run in fresh interpreters with the fault backend (``faulty`` / ``steady``, which record every
call; see conftest) and, for the fallbacks, a backend that has only ``log_metrics`` and
``log_text``, or only ``log_metrics``.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

from tests.core.conftest import make_dist
from tests.faults.conftest import Faults, explain_sync, journal_files, read_calls, sync
from tests.helpers.subprocess_python import JOBS, python_env

HF = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7"
SK = "sk-" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2H1g0"
URL = "https://trainer:s3cretpass@hub.example.com/models"

EVERY_KIND = JOBS / "rich_records_every_kind.py"


def _dir_sha(files: dict[str, bytes]) -> str:
    lines = [f"{rel}\0{hashlib.sha256(data).hexdigest()}\n" for rel, data in sorted(files.items())]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def _check_every_kind(faults: Faults, result: dict, backend: str) -> None:
    tables = faults.events("table", backend)
    assert [t["step"] for t in tables] == [0, 1, 2], tables
    first = tables[0]
    assert first["name"] == "rollout/samples"
    assert first["columns"] == ["prompt", "response", "reward", "ok", "missing", "nan", "np"]
    assert first["rows"][0][0].startswith("q0-0 ")  # not "changed after logging"
    assert [r[2] for r in first["rows"]] == [0.0, 0.25, 0.5, 0.75]
    assert [r[3] for r in first["rows"]] == [True, False, True, False]
    assert first["rows"][0][4] is None and first["rows"][0][5] == "nan" and first["rows"][0][6] == 0.5

    hists = faults.events("histogram", backend)
    assert [h["step"] for h in hists] == [0, 1, 2]
    assert all(h["count"] == 100 and sum(h["counts"]) == 100 and len(h["counts"]) == 10 for h in hists)

    texts = faults.events("text", backend)
    assert [t["name"] for t in texts] == ["critic/notes"] * 3
    assert texts[2]["text"].startswith("step 2: token ")

    arts = {a["key"]: a for a in faults.events("artifact", backend)}
    for name, sha in result["want"].items():
        assert arts[name]["sha256"] == sha, f"{name}: not the file as it was when logged"
        assert arts[name]["snapshot"] is True and arts[name]["kind"] == "checkpoint"
        assert arts[name]["name"] == f"critic/{name}"
    dump = arts["samples-dump"]
    assert dump["sha256"] == _dir_sha({k: v.encode() for k, v in result["dir_files"].items()})
    assert dump["kind"] == "dataset" and dump["size"] == 5 + 4000


@pytest.mark.slow
def test_every_kind_arrives_as_logged_with_secrets_redacted(faults: Faults, tmp_path: Path, jobs) -> None:
    td = tmp_path / "td"
    job = jobs(EVERY_KIND, faults.env(), args=[td, HF, SK, URL]).wait()
    result = job.result
    for backend in ("faulty", "steady"):
        _check_every_kind(faults, result, backend)
    for summary in (result["critic"], result["primary"]):
        assert summary["status"] == "FINISHED" and summary["journal"] is None, summary["describe"]
        for info in summary["backends"].values():
            assert info["undelivered"] == 0 and info["rejected"] == 0, summary["describe"]
    assert result["primary"]["logged"] == 3 + 3 + 1  # tables, histograms, the directory
    assert result["critic"]["logged"] == 3 + 3  # texts, checkpoints
    # Nothing of the planted secrets in anything a backend received; the journal is gone.
    received = faults.out.read_text()
    for secret in (HF, SK, "s3cretpass"):
        assert secret not in received
    assert "<redacted" in received
    assert journal_files(td) == []
    assert max(result["calls"]) < 0.05  # generous: the benchmark measures it properly


@pytest.mark.slow
def test_an_outage_then_sync_delivers_every_kind_exactly_once(faults: Faults, tmp_path: Path, jobs) -> None:
    td = tmp_path / "td"
    faults.go_down()  # the faulty tracker is down for the whole run
    job = jobs(EVERY_KIND, faults.env(), args=[td, HF, SK, URL]).wait()
    result = job.result
    _check_every_kind(faults, result, "steady")
    assert faults.events("table") == [] and faults.events("artifact") == []
    assert result["critic"]["journal"] and result["primary"]["journal"]
    # The snapshots stay with the journal until every backend has them.
    assert any("artifacts" in p.parts for p in journal_files(td))

    faults.come_back()
    done = sync(td, faults.env())
    assert done.returncode == 0, explain_sync(done)
    _check_every_kind(faults, result, "faulty")
    for ev, n in (("table", 3), ("histogram", 3), ("text", 3), ("artifact", 4)):
        assert len(faults.events(ev)) == n, ev
        assert len(faults.events(ev, "steady")) == n, f"{ev} sent again to a backend that had it"
    assert journal_files(td) == []
    again = sync(td, faults.env())
    assert again.returncode == 0 and len(faults.events("table")) == 3


@pytest.mark.slow
def test_a_table_one_tracker_refuses_is_skipped_for_it_only(faults: Faults, tmp_path: Path, jobs) -> None:
    job = jobs(JOBS / "rich_records_refused.py", faults.env(FAULT_REJECT_KEY="bad"), args=[tmp_path / "td"]).wait()
    summary = job.result["summary"]
    assert summary["status"] == "FINISHED"
    assert [t["step"] for t in faults.events("table") if t["key"] == "good"] == list(range(5))
    assert [t["key"] for t in faults.events("table")].count("bad") == 0
    assert len(faults.events("table", "steady")) == 10
    assert summary["backends"]["faulty"]["rejected"] == 5
    assert summary["backends"]["faulty"]["undelivered"] == 0
    assert summary["backends"]["steady"]["rejected"] == 0
    assert "backend 'faulty' rejects metric 'bad'" in job.stderr, job.stderr[-3000:]


@pytest.mark.slow
def test_a_backend_without_the_hooks_gets_the_documented_fallbacks(tmp_path: Path, jobs) -> None:
    site = tmp_path / "site"
    site.mkdir()
    bare = (JOBS / "rich_records_bare.py").read_text(encoding="utf-8")
    make_dist(site, "bare-tracking", {"bare": "bare_tracking"}, {"bare_tracking": bare})
    out = tmp_path / "bare.jsonl"
    env = python_env({"BARE_OUT": str(out)}, drop=("TRACKING_CORE_*",), site=site)
    job = jobs(JOBS / "rich_records_fallback.py", env, args=[tmp_path / "td"]).wait()
    calls = read_calls(out)
    texty = [c for c in calls if c["b"] == "texty"]
    scalars = [c for c in calls if c["b"] == "scalars"]
    # texty: tables as markdown, histograms as summary series, artifacts as a note.
    texts = [c for c in texty if c["ev"] == "text"]
    tables = [c for c in texts if c["name"] == "samples"]
    assert [t["step"] for t in tables] == [0, 1]
    assert tables[0]["text"].splitlines() == ["| prompt | reward |", "|---|---|", "| a\\|b | 1.5 |"]
    assert [t["text"] for t in texts if t["name"] == "note"] == ["hello", "hello"]
    note = next(t["text"] for t in texts if t["name"] == "ckpt.bin")
    assert hashlib.sha256(b"weights").hexdigest() in note and "(model)" in note and "7 bytes" in note
    for who in (texty, scalars):
        series = {(c["name"], c["step"]): c["value"] for c in who if c["ev"] == "metric"}
        assert series[("reward/mean", 0)] == 2.5 and series[("reward/max", 1)] == 4.0
        assert series[("reward/count", 0)] == 4.0 and math.isclose(series[("reward/p50", 1)], 2.5)
    assert not [c for c in scalars if c["ev"] == "text"]
    summary = job.result["summary"]
    assert summary["status"] == "FINISHED" and summary["journal"] is None, summary["describe"]
    assert summary["backends"]["texty"]["rejected"] == 0
    assert summary["backends"]["scalars"]["rejected"] == 2 + 2 + 1  # tables, texts, the artifact
    warned = job.stderr  # the delivery process's warnings
    assert "'texty' has no log_table hook: its tables go to it as text" in warned
    assert "'scalars' takes no tables" in warned and "'scalars' takes no artifacts" in warned
    assert warned.count("takes no tables") == 1  # once, not per table


@pytest.mark.slow
def test_bad_input_to_the_rich_kinds_never_raises(faults: Faults, tmp_path: Path, jobs) -> None:
    job = jobs(JOBS / "rich_records_bad_input.py", faults.env(), args=[tmp_path / "td"]).wait()
    assert job.result["raised"] == []
    summary = job.result["summary"]
    assert summary["status"] == "FINISHED" and summary["journal"] is None
    hist = faults.events("histogram", "steady")
    assert len(hist) == 1 and hist[0]["count"] == 2 and hist[0]["step"] is None
    assert [t["key"] for t in faults.events("table", "steady")] == ["ok"]
    assert [t["text"][:8] for t in faults.events("text", "steady")] == ["<object "]
    warned = "\n".join(job.warnings)
    assert "log_table('t') needs a sequence of mappings" in warned
    assert "row 0 is a int" in warned
    assert "histogram 'h' could not be logged" in warned
    assert "cannot read /does/not/exist" in warned
    assert summary["skipped"]["h"] >= 2


@pytest.mark.slow
def test_delivered_snapshots_are_deleted_while_the_run_goes_on(faults: Faults, tmp_path: Path, jobs) -> None:
    job = jobs(JOBS / "rich_records_rotation.py", faults.env(), args=[tmp_path / "td"]).wait()
    assert job.result["flushed"] is True
    assert job.result["left"] == [], "snapshots of delivered artifacts kept their disk space"
    assert len(faults.events("artifact", "steady")) == 6
