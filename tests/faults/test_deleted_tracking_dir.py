"""The tracking directory deleted while the run goes on (a ``/tmp`` cleaner, an ``rm -rf`` of old
runs). The journal is made again, with one warning, and delivery goes on from it without a gap
or a repeat: records the writer had journaled before the deletion and delivery had not read yet
are not lost (the writer copies the segment it was writing into the new one, the readers finish
the segments they hold open). A real training process logging 1,500 steps to a real MLflow
server, jsonl and the fault suite's ``steady`` backend has its directory deleted in the middle:
MLflow's own client reads every step once, the run is FINISHED. When the training process is
killed -9 after the deletion, the delivery process (or ``tracking-core sync``, when it is killed
too) delivers the rest."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.faults.conftest import Faults, explain_sync, journal_files, missing_and_extra, once, sync
from tests.faults.mlflow_runs import steps_of, the_run
from tests.helpers.mlflow_server import MlflowServer
from tests.helpers.subprocess_python import JOBS
from tracking_core.delivery.journal import (
    FOLLOWER_LOCK,
    META,
    WRITER_LOCK,
    JournalWriter,
    SegmentReader,
    held,
    read_acks,
    segments,
)

STEPS = 1500


def _delete_while_running(td: Path) -> None:
    """Delete ``td`` under a running job at once, as a cleaner does. The job writes into it all the
    time (journal segments, delivery's progress), so a plain ``rmtree`` can find a file made after
    it listed a folder and fail with "Directory not empty": the directory is moved aside in one
    step (its path is gone, what is open in it stays open, as with ``rm -rf``), then removed."""
    gone = td.with_name(td.name + ".deleted")
    td.rename(gone)
    shutil.rmtree(gone)


# -- the journal itself, step by step ------------------------------------------------------------
def _lines(first: int, count: int) -> bytes:
    return b"".join(
        b'{"n":%d,"t":"row","m":{"x":%d}}\n' % (n, n) for n in range(first, first + count)
    )


def _numbers(reader: SegmentReader) -> list[int]:
    out: list[int] = []
    while True:
        got = reader.read(1000)
        if not got:
            return out
        out.extend(obj["n"] for obj in got)


def _unique_in_order(numbers: list[int]) -> list[int]:
    """What a follower's stream takes: a number at or below the last one taken is a repeat."""
    out: list[int] = []
    for n in numbers:
        if not out or n > out[-1]:
            out.append(n)
    return out


def test_records_written_around_the_deletion_are_all_read_once(tmp_path: Path) -> None:
    folder = tmp_path / "td" / "journal" / "run" / "primary-p1"
    writer = JournalWriter(folder, {"label": "primary-p1"}, 1 << 20)
    reader = SegmentReader(folder)
    writer.append(_lines(0, 100))
    seen = _numbers(reader)  # read all of it: the segment is now held open
    writer.append(_lines(100, 50))  # not read before the deletion
    shutil.rmtree(tmp_path / "td")
    writer.append(_lines(150, 50))  # meets the deletion: written into the deleted segment
    writer.append(_lines(200, 50))
    seen += _numbers(reader)
    assert _unique_in_order(seen) == list(range(250)), missing(seen, 250)
    meta = json.loads((folder / META).read_text())
    assert meta["label"] == "primary-p1"
    assert [index for index, _ in segments(folder)] == [1], "numbering goes on after the lost one"
    assert writer.recreated == 1
    # A reader starting now (tracking-core sync) finds every record journaled since the
    # deletion's segment began: none was journaled only into the deleted folder.
    assert _unique_in_order(_numbers(SegmentReader(folder))) == list(range(250))
    writer.close()


def test_a_reader_one_segment_behind_loses_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "td" / "journal" / "run" / "primary-p1"
    writer = JournalWriter(folder, {"label": "primary-p1"}, 4000)
    reader = SegmentReader(folder)
    writer.append(_lines(0, 60))  # about 2 KB: segment 0
    first = reader.read(10)  # the reader holds segment 0, ten records in
    writer.append(_lines(60, 120))  # fills segment 0, goes on in 1: never opened by the reader
    assert writer.index >= 1
    shutil.rmtree(tmp_path / "td")
    writer.append(_lines(180, 20))
    seen = [obj["n"] for obj in first] + _numbers(reader)
    assert _unique_in_order(seen) == list(range(200)), missing(seen, 200)
    assert writer.recreated == 1
    writer.close()


def test_a_folder_that_cannot_be_made_again_raises_oserror_from_append(tmp_path: Path) -> None:
    parent = tmp_path / "td"
    folder = parent / "journal" / "run" / "primary-p1"
    writer = JournalWriter(folder, {}, 1 << 20)
    writer.append(_lines(0, 10))
    shutil.rmtree(parent)
    parent.write_text("a file where the tracking directory was\n")
    with pytest.raises(OSError):
        writer.append(_lines(10, 10))  # the hand-off: the caller journals these elsewhere
    with pytest.raises(OSError):
        writer.append(_lines(20, 10))  # never again into the deleted segment
    parent.unlink()
    writer.append(_lines(30, 10))  # the folder can be made again: the journal takes records
    assert writer.recreated == 1 and (folder / META).exists()
    writer.close()


def test_after_its_end_a_removed_journal_is_not_made_again(tmp_path: Path) -> None:
    """The completion rule removes a delivered journal while its writer still holds it: a late
    write then must not bring the folder back."""
    folder = tmp_path / "td" / "journal" / "run" / "primary-p1"
    writer = JournalWriter(folder, {}, 1 << 20)
    writer.append(_lines(0, 10))
    writer.seal()
    shutil.rmtree(tmp_path / "td" / "journal")
    writer.append(_lines(10, 1))
    writer.close()
    assert not (tmp_path / "td" / "journal").exists()


def missing(seen: list[int], count: int) -> str:
    got = set(seen)
    lost = [n for n in range(count) if n not in got]
    return f"{len(lost)} missing (e.g. {lost[:10]})"


# -- a real training process, a real MLflow server -----------------------------------------------
JOB = JOBS / "deleted_tracking_dir.py"

DELETED = "was deleted while the run went on"


def _jsonl_steps(td: Path, run_id: str) -> tuple[list[int], list[str]]:
    path = td / "jsonl" / run_id / "primary.jsonl"
    steps, status = [], []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        if obj["type"] == "metric":
            steps.append(obj["step"])
        elif obj["type"] == "status":
            status.append(obj["status"])
    return steps, status


@pytest.mark.slow
def test_the_tracking_dir_deleted_mid_run(
    mlflow_server: MlflowServer, faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    job = jobs(JOB, faults.env(), args=[mlflow_server.uri, td, "finish", STEPS])
    job.readline_until("HALF")
    _delete_while_running(td)
    job.wait(90)
    result = job.result
    summary = result["summary"]
    run_id = result["run_id"]
    mlrun = the_run(mlflow_server.uri, run_id)
    assert steps_of(mlflow_server.uri, mlrun.info.run_id, "loss") == list(range(STEPS)), summary[
        "describe"
    ]
    assert mlrun.info.status == "FINISHED"
    assert mlrun.data.params.get("lr") == "0.1"
    # Not a record lost or repeated on the way (steady counts every call it got).
    want = once(["loss"], range(STEPS))
    got = faults.metrics("steady", raw=True)
    assert got == want, missing_and_extra(got, want)
    assert [c["status"] for c in faults.events("close", "steady")] == ["FINISHED"]
    assert summary["drained"] is True, summary["describe"]
    assert "made again" in summary["describe"], summary["describe"]
    # jsonl's own file went with the directory: it goes on in a new one, from where it was.
    steps, status = _jsonl_steps(td, run_id)
    assert steps == list(range(steps[0], STEPS)) and steps[0] <= 1000, steps[:5]
    assert status == ["FINISHED"]
    # One warning, naming the journal; the run handle is back for resume and sync.
    assert len(job.warnings_mentioning(DELETED)) == 1, job.warnings
    assert result["journal"] in job.warnings_mentioning(DELETED)[0]
    assert (td / "runs" / run_id / "handle.json").exists()
    assert journal_files(td) == [], "a delivered journal is removed, made again or not"
    assert "Traceback" not in job.stderr, job.stderr[-4000:]


@pytest.mark.slow
def test_deleted_then_killed_sync_delivers_the_rest(
    mlflow_server: MlflowServer, faults: Faults, tmp_path: Path, jobs
) -> None:
    td = tmp_path / "td"
    job = jobs(JOB, faults.env(), args=[mlflow_server.uri, td, "kill", STEPS])
    delivery = int(job.readline_until("DELIVERY "))
    job.readline_until("HALF")
    _delete_while_running(td)
    job.readline_until("LOGGED")
    time.sleep(1.5)  # three flush intervals: step 1200 is journaled, in the folder made again
    [folder] = [p.parent for p in (td / "journal").rglob(META)]
    # The folder made again is a journal like any: its writer and its follower hold its locks
    # (a sync now steps aside), and delivery saves its progress there again.
    locks = {name: held(folder / name) for name in (WRITER_LOCK, FOLLOWER_LOCK)}
    job.kill()
    with contextlib.suppress(ProcessLookupError):
        os.kill(delivery, signal.SIGKILL)  # nothing delivers the rest but sync
    job.wait(30, check=False)
    assert locks == {WRITER_LOCK: True, FOLLOWER_LOCK: True}
    assert read_acks(folder)["steady"].n > 0
    done = sync(td, faults.env())
    assert done.returncode == 0, explain_sync(done)
    run_id = json.loads(next((td / "runs").glob("*/handle.json")).read_text())["run_id"]
    mlrun = the_run(mlflow_server.uri, run_id)  # one run: sync found the one the job opened
    assert steps_of(mlflow_server.uri, mlrun.info.run_id, "loss") == list(range(1201))
    assert mlrun.info.status == "KILLED"
    want = once(["loss"], range(1201))
    got = faults.metrics("steady")
    assert got == want, missing_and_extra(got, want)
    assert journal_files(td) == []


ORPHAN_JOB = JOBS / "deleted_tracking_dir_orphan.py"


@pytest.mark.slow
def test_deleted_then_killed_at_once_the_delivery_process_finishes(
    mlflow_server: MlflowServer, faults: Faults, tmp_path: Path, jobs
) -> None:
    """The writer never learns of the deletion: the delivery process makes the journal again
    from what it still holds, journals the end and delivers it."""
    td = tmp_path / "td"
    job = jobs(
        ORPHAN_JOB, faults.env(TRACKING_CORE_EXIT_TIMEOUT="30"), args=[mlflow_server.uri, td]
    )
    run_id = json.loads(job.readline_until("RESULT "))["run_id"]
    job.readline_until("LOGGED")
    _delete_while_running(td)
    job.kill()
    job.wait(30, check=False)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not faults.events("close", "steady"):
        time.sleep(0.2)
    assert [c["status"] for c in faults.events("close", "steady")] == ["KILLED"]
    want = once(["loss"], range(STEPS))
    got = faults.metrics("steady", raw=True)
    assert got == want, missing_and_extra(got, want)
    mlrun = the_run(mlflow_server.uri, run_id)
    deadline = time.monotonic() + 15
    while mlrun.info.status == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
        mlrun = the_run(mlflow_server.uri, run_id)
    assert mlrun.info.status == "KILLED"
    assert steps_of(mlflow_server.uri, mlrun.info.run_id, "loss") == list(range(STEPS))
    deadline = time.monotonic() + 10
    while journal_files(td) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert journal_files(td) == [], "delivered: the journal made again is removed"
