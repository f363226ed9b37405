"""The plugin API's helpers for trackers that keep one run object per process (W&B, SwanLab):
the table of runs shared by a process's writers, and the role sections the primary folds in."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tracking_core.plugin_api import RunContext, RunHandle
from tracking_core.shared_run import SharedRuns, saved_role_sections


def test_a_shared_run_ends_with_its_last_user_and_the_primarys_status() -> None:
    runs = SharedRuns()
    shared = runs.add("run", "id-1")
    assert runs.join("id-1") is shared and shared.users == 2
    assert runs.join("id-2") is None
    assert not runs.leave(shared, "crashed", primary=True)  # the actor still writes through it
    assert runs.join("id-1") is shared  # still open: a late role joins it
    assert not runs.leave(shared, "success", primary=False)
    assert runs.leave(shared, "success", primary=False)
    assert shared.status == "crashed"  # the primary's, whoever closed last
    assert runs.join("id-1") is None


def test_without_the_primary_the_last_user_says_how_it_ended() -> None:
    runs = SharedRuns()
    shared = runs.add("run", "id-1")
    assert runs.leave(shared, "success", primary=False)
    assert shared.status == "success"


def test_saved_role_sections_are_the_roles_params_except_the_writers_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = RunContext("acme", "r1", "r1", True, tmp_path)
    folder = RunHandle(run_id="r1", name="r1", tracking_dir=str(tmp_path)).run_dir / "config"
    folder.mkdir(parents=True)
    docs = {
        "actor": {"role": "actor", "namespace": "actor", "prefix": "actor/", "values": {"lr": 1e-6, "n": None}},
        "critic": {"role": "critic", "namespace": "critic", "prefix": "critic/", "values": {"lr": 1e-5}},
        "launch": {"role": None, "namespace": "launch", "prefix": "", "values": {"seed": 1}},
        "files": {"role": "rollout", "namespace": "files", "prefix": "", "values": {"x": 1}, "logged_as_params": False},
    }
    for name, doc in docs.items():
        (folder / f"{name}.json").write_text(json.dumps(doc))
    (folder / "torn.json").write_text('{"role": "act')
    with caplog.at_level(logging.WARNING):
        sections = list(saved_role_sections(run, {"critic"}, "Acme"))
    assert [(s.role, s.namespace, dict(s.params)) for s in sections] == [
        ("actor", "actor", {"actor/lr": 1e-6, "actor/n": None})
    ]
    assert "torn.json for Acme" in caplog.text
