"""The one mapping from a name to a file name (tracking_core.names), and an artifact that never
holds a journal (tracking_core.delivery.snapshot.hold)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracking_core.delivery.snapshot import hold
from tracking_core.names import MARK, MAX_PART_BYTES, path_part, path_under

WORST = ["../../x", "/abs/x", "a/../../b", "..", ".", "", "a\0b", "y" * 300, "a\\b", "C:x", "~", "\ud800", "é" * 100]


def _one_part(part: str) -> bool:
    return (
        part not in ("", ".", "..")
        and "/" not in part
        and "\0" not in part
        and len(part.encode("utf-8")) <= 255
        and os.path.basename(part) == part
    )


@pytest.mark.parametrize("name", WORST)
def test_worst_names_become_one_safe_part(name: str) -> None:
    part = path_part(name)
    assert _one_part(part) and part.endswith(MARK + part.rsplit(MARK, 1)[1])
    assert len(part.encode("utf-8")) <= MAX_PART_BYTES
    assert path_part(name) == part  # the same every time
    under = path_under(name)
    assert not os.path.isabs(under) and all(_one_part(p) for p in under.split("/"))


def test_plain_names_are_kept() -> None:
    for name in ("actor", "critic-ranks", "rollout samples", "演员", "ckpt.v2", "x" * MAX_PART_BYTES):
        assert path_part(name) == name
    assert path_under("ckpt/step-10") == "ckpt/step-10"
    assert path_part("ckpt/step-10") != "ckpt/step-10"


def test_a_mapped_name_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tracking_core.names"):
        for _ in range(3):
            path_part("../said-once", "role")
    assert caplog.text.count("'../said-once'") == 1
    assert repr(path_part("../said-once")) in caplog.text


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("./\\~\0"), max_size=140), unique=True, max_size=8))
def test_property_distinct_names_distinct_safe_parts(names: list[str]) -> None:
    # A mapped name is among the names too: a mapping never lands on a name kept as given.
    names = list(dict.fromkeys(names + [path_part(n) for n in names]))
    parts = [path_part(n) for n in names]
    assert len(set(parts)) == len(names)
    assert all(_one_part(p) for p in parts)
    unders = [path_under(n) for n in names]
    assert len(set(unders)) == len(names)
    assert all(all(_one_part(p) for p in u.split("/")) for u in unders)


# -- artifacts never hold a journal ---------------------------------------------------------------
def _journal(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"format": 2}))
    (folder / "seg-000000.jsonl").write_text("{}\n")
    (folder / "writer.lock").write_text("")


def test_hold_leaves_out_the_tracking_directory_and_every_journal(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "data" / "a.txt").write_text("a")
    (work / "data" / "meta.json").write_text("{}")  # a meta.json alone is no journal
    _journal(work / "tr" / "journal" / "run" / "primary-p1")
    (work / "tr" / "runs").mkdir()
    (work / "tr" / "runs" / "handle.json").write_text("{}")
    _journal(work / "old" / "journal" / "r1" / "actor-r0-p2")  # another run's journal
    (work / "old" / "notes.txt").write_text("n")

    held = hold(work, "workdir", "artifact", work / "tr")
    try:
        assert sorted(rel for rel, _, _ in held.files) == ["data/a.txt", "data/meta.json", "old/notes.txt"]
        assert held.left_out == ["old/journal/r1/actor-r0-p2", "tr"]
    finally:
        held.release()

    whole = hold(work / "tr", None, "artifact", work / "tr")  # the tracking directory itself
    inside = hold(work / "tr" / "journal" / "run", None, "artifact", work / "tr")
    assert whole.files == inside.files == [] and whole.left_out == inside.left_out == ["."]
    plain = hold(work / "data", None, "artifact", work / "tr")
    try:
        assert len(plain.files) == 2 and plain.left_out == []
    finally:
        plain.release()


def test_a_run_looked_up_by_its_path_is_not_called_a_mapped_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """`diff`, `show` and saved-run lookups take a run directory's path as well as a run id:
    a path is tried as one, and no warning says it was mapped (the demo's diff once did)."""
    import tracking_core
    from tracking_core.config.diff import diff_command
    from tracking_core.saved_runs import find_saved_run

    tracking_core.start_run({"lr": 1}, backends=[], tracking_dir=tmp_path, run_id="r1").finish(5)
    run_dir = tmp_path / "runs" / "r1"
    with caplog.at_level(logging.WARNING, logger="tracking_core"):
        assert find_saved_run(str(run_dir), tmp_path).run_id == "r1"
        diff_command(str(run_dir), ["launch", "launch"], str(tmp_path))
    capsys.readouterr()
    assert not [r for r in caplog.records if r.name.startswith("tracking_core.names")], caplog.text
