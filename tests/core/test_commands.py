"""Commands plugins add to ``tracking-core`` (the ``register_commands`` hook), each plugin under
its own guard; a plugin is a real installed distribution found through its entry point."""

from __future__ import annotations

import json
from pathlib import Path

from tests.core.conftest import make_dist
from tests.helpers.subprocess_python import JOBS, run_python

CLI = "import sys; from tracking_core.cli import main; sys.exit(main(sys.argv[1:]))"

HELLO = (JOBS / "commands_hello.py").read_text(encoding="utf-8")

BROKEN = (JOBS / "commands_broken.py").read_text(encoding="utf-8")

TAKER = (JOBS / "commands_taker.py").read_text(encoding="utf-8")


def test_hook_register_commands(site: Path, tmp_path: Path) -> None:
    make_dist(site, "hello-tracking", {"hello": "hello_plugin"}, {"hello_plugin": HELLO})
    before = str(tmp_path / "before")
    ran = run_python(CLI, args=["--tracking-dir", before, "hello", "--name", "x"], site=site, check=False)
    assert ran.returncode == 3, ran.stderr
    assert json.loads(ran.stdout) == {"name": "x", "tracking_dir": before}  # its own namespace only
    after = run_python(CLI, args=["--tracking-dir", before, "hello", "--name", "y", "--tracking-dir", "a"], site=site, check=False)
    assert json.loads(after.stdout) == {"name": "y", "tracking_dir": "a"}  # after the command wins

    listed = run_python(CLI, args=["--help"], site=site)
    assert "greet a run (a third-party command)" in listed.stdout
    assert any(line.split()[:1] == ["hello"] for line in listed.stdout.splitlines())
    own = run_python(CLI, args=["hello", "--help"], site=site)
    assert own.stdout.startswith("usage: tracking-core hello [-h] --name NAME") and "Say hello to a run." in own.stdout

    wrong = run_python(CLI, args=["hello", "--nmae", "x"], site=site, check=False)
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert wrong.stderr.splitlines() == [
        "usage: tracking-core hello [-h] --name NAME [--tracking-dir TRACKING_DIR]",
        "tracking-core hello: error: the following arguments are required: --name",
        "see `tracking-core hello --help`",
    ]


def test_a_plugin_whose_register_commands_raises_is_named_and_left_out(site: Path) -> None:
    make_dist(
        site,
        "rough-tracking",
        {"broken": "broken_commands", "taker": "taker_commands", "hello": "hello_plugin"},
        {"broken_commands": BROKEN, "taker_commands": TAKER, "hello_plugin": HELLO},
    )
    listed = run_python(CLI, args=["--help"], site=site)
    commands = " ".join(listed.stdout.split())
    assert "greet a run" in commands and "demo" in commands  # the others' commands are there
    assert "half" not in commands and "mine" not in commands  # none of a failing plugin's
    assert "plugin 'broken'" in listed.stderr and "boom in register_commands" in listed.stderr
    assert "plugin 'taker'" in listed.stderr and "command 'show' is taken (by tracking-core)" in listed.stderr
    assert "Traceback" not in listed.stderr

    refused = run_python(CLI, args=["half"], site=site, check=False)
    assert refused.returncode == 2 and "invalid choice: 'half'" in refused.stderr

    plugins = run_python(CLI, args=["plugins", "--json"], site=site)
    rows = {row["name"]: row for row in json.loads(plugins.stdout)}
    assert "boom in register_commands" in rows["broken"]["error"]
    assert "command 'show' is taken" in rows["taker"]["error"]
    assert rows["hello"]["error"] is None and rows["jsonl"]["error"] is None
    assert rows["hello"]["kind"] == "command" and rows["slime"]["kind"] == "command"


def test_help_lists_the_demo_without_importing_it_or_any_tracker() -> None:
    out = run_python(JOBS / "commands_help_imports.py")
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [[], True]
