"""Files the run writes from more than one thread at once (the run handle, saved by the caller's
thread and by delivery as backends open), a write that fails half-way, and journals found while
their folders change."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tracking_core.delivery.journal import JOURNAL_DIR, META, find_journals
from tracking_core.files import replace_text
from tracking_core.handle import RunHandle


def test_the_run_handle_is_saved_from_several_threads_at_once(tmp_path: Path) -> None:
    handle = RunHandle(run_id="r1", name="r1", tracking_dir=str(tmp_path))
    errors: list[BaseException] = []

    def save() -> None:
        for _ in range(300):
            try:
                handle.save()
            except OSError as exc:  # one thread's temporary file renamed by another
                errors.append(exc)

    threads = [threading.Thread(target=save) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert RunHandle.parse(handle.run_dir).run_id == "r1"
    assert [p.name for p in handle.run_dir.iterdir()] == ["handle.json"]


def test_a_write_that_fails_half_way_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "handle.json"
    replace_text(path, '{"run_id": "r1"}')
    with pytest.raises(UnicodeEncodeError):  # the temporary file is created, then cannot be written
        replace_text(path, '{"run_id": "\ud800"}')
    assert path.read_text() == '{"run_id": "r1"}'
    assert [p.name for p in tmp_path.iterdir()] == ["handle.json"]


def test_journals_are_found_without_walking_into_them(tmp_path: Path) -> None:
    """A journal folder's insides (segments, artifact snapshots being renamed) are not walked:
    nothing there can make the search fail, and nothing there is taken for a journal."""
    writer = tmp_path / JOURNAL_DIR / "run-1" / "primary-p1"
    (writer / "artifacts" / "n0000000000").mkdir(parents=True)
    (writer / META).write_text("{}")
    (writer / "artifacts" / "n0000000000" / META).write_text("{}")  # a file that happens to be named so
    other = tmp_path / JOURNAL_DIR / "run-1" / "actor-p2"
    other.mkdir()
    (other / META).write_text("{}")
    assert list(find_journals(tmp_path)) == [other, writer]
