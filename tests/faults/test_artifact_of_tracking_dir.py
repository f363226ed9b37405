"""An artifact never holds a journal: ``log_artifact`` of a folder that contains the tracking
directory (the job's working directory, say) delivers the rest of the folder and leaves the
tracking directory out, with one warning (journal folders elsewhere in it: tests/core/test_names.py). A copy of the live journal inside the artifact would be
found by ``tracking-core sync`` and replayed as a second writer: every value twice, and a sync
that never ends well."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from tests.faults.conftest import DROP, explain_sync, sync
from tests.helpers.subprocess_python import JOBS, python_env

JOB = JOBS / "artifact_of_tracking_dir.py"


def test_an_artifact_of_the_working_directory_leaves_the_journals_out(tmp_path: Path, jobs) -> None:
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "data" / "samples.txt").write_text("samples")
    env = python_env({"PYTHONUNBUFFERED": "1", "TRACKING_CORE_EXIT_TIMEOUT": "5"}, drop=DROP)

    job = jobs(JOB, env, cwd=work).wait(120)
    res = job.result
    assert res["summary"]["drained"] is True, res["summary"]["describe"]
    # sync finds nothing to replay: exit 0, every value in jsonl exactly once.
    for _ in range(2):
        done = sync(work / "tr", env)
        assert done.returncode == 0, explain_sync(done)
    lines = [json.loads(x) for x in (work / "tr" / "jsonl" / res["run_id"] / "primary.jsonl").read_text().splitlines()]
    steps = Counter(r["step"] for r in lines if r["type"] == "metric")
    assert steps == Counter(range(200)), {s: n for s, n in steps.items() if n != 1}

    told = job.warnings_mentioning("left out")
    assert len(told) == 1 and "tr" in told[0], job.warnings

    # The rest of the folder is delivered; no journal, and nothing of the tracking directory.
    copy = work / "tr" / "jsonl" / res["run_id"] / "artifacts" / "primary" / "workdir"
    assert (copy / "data" / "samples.txt").read_text() == "samples"
    assert not (copy / "tr").exists()
    assert not list(copy.rglob("meta.json")) and not list(copy.rglob("seg-*.jsonl"))
