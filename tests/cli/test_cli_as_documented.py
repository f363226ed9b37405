"""The ``tracking-core`` command does what docs/cli.md says, run as a user runs it: the console
script of this environment in a process of its own (and ``./run.sh``).

diff with two or more roles, ``--tracking-dir`` before or after every subcommand, the settings in
``--help``, three-line usage errors, an unknown ``./run.sh`` command, the install hint of a missing
library, and ``show`` reading a trackio run back."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.saved_run import LAST, make_saved_run
from tests.helpers.subprocess_python import JOBS, hiding, python_env
from tracking_core import settings
from tracking_core.handle import RunHandle

ROOT = Path(__file__).resolve().parents[2]
TRACKING_CORE = Path(sys.executable).parent / "tracking-core"
DROP = ("TRACKING_CORE_*", "MLFLOW_*", "TRACKIO_*")


def tracking_core(*args: str | Path, cwd: Path, site: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACKING_CORE), *map(str, args)],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False,
        env=python_env({"COLUMNS": "100"}, drop=DROP, site=site),
    )  # fmt: skip


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> RunHandle:
    """A finished run in trackio and jsonl (both local files: seconds to write and read)."""
    return make_saved_run(tmp_path_factory.mktemp("documented"), "trackio,jsonl")


# -- diff --------------------------------------------------------------------------------------
def _rows(table: str) -> dict[str, list[str]]:
    """The first table of ``diff``'s output: key -> its cells."""
    lines = table.split("\n\n")[0].splitlines()
    return {line.split()[0]: re.split(r"\s{2,}", line.strip())[1:] for line in lines[2:]}


def test_diff_of_three_roles_shows_each_keys_value_per_role(saved: RunHandle, tmp_path: Path) -> None:
    done = tracking_core("diff", saved.run_id, "--roles", "actor", "critic", "launch", "--tracking-dir", saved.tracking_dir, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.splitlines()[0].split() == ["key", "actor", "critic", "launch"]
    # lr differs in all three, seed is only in launch; kl_coef is 0.0, 0, 0.0: the same number
    assert _rows(out) == {"lr": ["0.002", "0.01", "0.001"], "seed": ["(absent)", "(absent)", "7"]}
    assert "2 key(s) not the same in actor, critic, launch (not counted, listed below: 1 numeric type-only difference(s))" in out
    below = out[out.index("The same number in another type: 1"):]
    assert re.search(r"^kl_coef\s+0\.0 \(float\)\s+0 \(int\)\s+0\.0 \(float\)$", below, re.M), below


def test_diff_without_a_run_takes_the_latest_and_two_roles_stay_a_change_table(saved: RunHandle, tmp_path: Path) -> None:
    done = tracking_core("--tracking-dir", saved.tracking_dir, "diff", "--roles", "critic", "actor", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == ["key", "change", "critic", "actor"]
    assert _rows(done.stdout) == {"lr": ["value", "0.01", "0.002"]}


def test_diff_of_one_role_is_a_usage_error(saved: RunHandle, tmp_path: Path) -> None:
    done = tracking_core("diff", saved.run_id, "--roles", "actor", "--tracking-dir", saved.tracking_dir, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert "argument --roles: needs two or more roles to compare, got actor" in done.stderr


# -- --tracking-dir, before or after the subcommand ---------------------------------------------
@pytest.mark.parametrize("command", [["show"], ["diff"], ["plugins"], ["sync"], ["ui", "--dry-run"]])
def test_tracking_dir_before_the_subcommand_is_the_same_as_after_it(command: list[str], saved: RunHandle, tmp_path: Path) -> None:
    after = tracking_core(*command, "--tracking-dir", saved.tracking_dir, cwd=tmp_path)
    before = tracking_core("--tracking-dir", saved.tracking_dir, *command, cwd=tmp_path)
    assert "unrecognized arguments" not in after.stderr and "invalid choice" not in before.stderr
    assert (before.returncode, before.stdout) == (after.returncode, after.stdout)
    if command[0] in ("show", "diff", "ui"):  # it was used: the run there was found
        assert before.returncode == 0, before.stderr
        assert saved.run_id in before.stdout or "lr" in before.stdout


def test_the_tracking_dir_after_the_subcommand_wins(saved: RunHandle, tmp_path: Path) -> None:
    done = tracking_core("--tracking-dir", tmp_path / "elsewhere", "show", "--tracking-dir", saved.tracking_dir, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"run {saved.run_id} ")


def test_the_demo_gets_a_tracking_dir_given_before_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tracking-core --tracking-dir X demo` is `tracking-core demo --tracking-dir X`; one after
    `demo` wins (the demo's own run is tests/demo's)."""
    from slime_integration.demo import driver
    from tracking_core import cli

    seen: list[str] = []
    monkeypatch.setattr(driver, "run_demo", lambda args: seen.append(args.tracking_dir) or 0)
    assert cli.main(["--tracking-dir", str(tmp_path / "before"), "demo", "--steps", "1"]) == 0
    assert cli.main(["--tracking-dir", "x", "demo", "--tracking-dir", str(tmp_path / "after")]) == 0
    assert cli.main(["demo", "--tracking-dir", str(tmp_path / "after")]) == 0
    assert seen == [str(tmp_path / "before"), str(tmp_path / "after"), str(tmp_path / "after")]


# -- help and errors ------------------------------------------------------------------------------
def test_help_lists_every_setting_with_what_it_does(tmp_path: Path) -> None:
    done = tracking_core("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    help_text = done.stdout[done.stdout.index("settings (environment variables"):]
    flat = " ".join(help_text.split())
    for name, what in settings.ALL.items():
        assert re.search(rf"^  {name} ", help_text, re.M), name
        assert " ".join(what.split()) in flat.replace("- ", "-"), name


@pytest.mark.parametrize(
    ("argv", "usage", "error"),
    [
        (["demo", "--steps", "x"], "usage: tracking-core demo [options]", "argument --steps: invalid int value: 'x'"),
        (["demo", "--stpes", "3"], "usage: tracking-core demo [options]", "unrecognized arguments: --stpes 3"),
        (["sync", "--quite"], "usage: tracking-core sync ", "unrecognized arguments: --quite"),
        (["dmeo"], "usage: tracking-core ", "argument COMMAND: invalid choice: 'dmeo'"),
        (["show", "--limit", "many"], "usage: tracking-core show ", "argument --limit: invalid int value: 'many'"),
    ],
)
def test_a_usage_error_is_the_usage_on_one_line_the_error_and_where_help_is(argv: list[str], usage: str, error: str, tmp_path: Path) -> None:
    done = tracking_core(*argv, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 3, done.stderr
    command = "tracking-core" if argv[0] == "dmeo" else f"tracking-core {argv[0]}"
    assert lines[0].startswith(usage) and len(lines[0]) <= 160, lines[0]
    assert lines[1].startswith(f"{command}: error: {error}"), lines[1]
    assert lines[2] == f"see `{command} --help`"
    assert list(tmp_path.iterdir()) == []  # nothing started


def test_run_sh_names_an_unknown_command(tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(ROOT / "run.sh"), "dmeo"], capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[0] == "./run.sh: unknown command 'dmeo' (the commands: demo, ui, test, test-fast)"
    assert done.stderr.splitlines()[1].startswith("usage: ./run.sh demo")
    bare = subprocess.run(["bash", str(ROOT / "run.sh")], capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False)
    assert bare.returncode == 2 and bare.stderr.startswith("usage: ./run.sh demo") and "unknown" not in bare.stderr
    assert list(tmp_path.iterdir()) == []


# -- the install hint of a missing library ---------------------------------------------------------
def test_a_missing_library_names_the_extra_and_the_packages_it_installs(tmp_path: Path) -> None:
    done = tracking_core("plugins", cwd=tmp_path, site=hiding(tmp_path / "site", "tensorboardX"))
    assert done.returncode == 0, done.stderr
    assert (
        '  missing: tracking backend \'tensorboard\' needs tensorboardX, which is not installed: pip install '
        '"tracking-core[tensorboard]" (it installs tensorboardX>=2.6, tensorboard>=2.15, crc32c>=2.3)'
    ) in done.stdout


def test_a_third_party_plugins_extra_is_its_own_distributions(tmp_path: Path) -> None:
    """A plugin in a distribution of its own (``tracking-acme``) whose backend needs a package
    with another import name: the hint installs *that* distribution's extra, not tracking-core's."""
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(JOBS / "cli_as_documented_acme" / "tracking_acme.py", site / "tracking_acme.py")
    dist = site / "tracking_acme-1.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tracking-acme\nVersion: 1.2\nProvides-Extra: sdk\n"
        'Requires-Dist: tracking-core\nRequires-Dist: acme-python-sdk>=3; extra == "sdk"\n'
    )
    (dist / "entry_points.txt").write_text("[tracking_core]\nacme = tracking_acme\n")
    done = tracking_core("plugins", cwd=tmp_path, site=site)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^acme\s+backend\s+MISSING\s+tracking-acme 1\.2$", done.stdout, re.M), done.stdout
    assert (
        "missing: tracking backend 'acme' needs acme_sdk, which is not installed: "
        'pip install "tracking-acme[sdk]" (it installs acme-python-sdk>=3)'
    ) in done.stdout


# -- show: trackio ------------------------------------------------------------------------------
def _section(out: str, tracker: str) -> str:
    match = re.search(rf"^\[{tracker}\] (.*?)(?=^\[|^configs|\Z)", out, re.M | re.S)
    assert match, out
    return match.group(1)


def test_show_reads_trackio_back(saved: RunHandle, tmp_path: Path) -> None:
    entry = saved.backends["trackio"]
    done = tracking_core("show", saved.run_id, "--tracking-dir", saved.tracking_dir, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    section = _section(done.stdout, "trackio")
    database = Path(entry["dir"]) / "tracking-core.db"
    assert section.startswith(f"run saved-run ({saved.run_id}) in project tracking-core, {database}  FINISHED\n"), section
    assert "no local reader" not in section and "cannot read" not in section
    assert f"open it with: TRACKIO_DIR={entry['dir']} " in section
    for role, series in LAST.items():
        for key, value in series.items():
            assert f"    {role}/{key} = {value:.6g} (step 2)\n" in section, section


def test_show_says_how_to_install_a_missing_reader(saved: RunHandle, tmp_path: Path) -> None:
    done = tracking_core("show", saved.run_id, "--tracking-dir", saved.tracking_dir, cwd=tmp_path, site=hiding(tmp_path / "site", "trackio"))
    assert done.returncode == 0, done.stderr
    section = _section(done.stdout, "trackio")
    assert "cannot read it: No module named 'trackio'; to read it here: " in section
    assert 'pip install "tracking-core[trackio]" (it installs trackio>=' in section
    assert "    actor/train/pg_loss" in _section(done.stdout, "jsonl")  # the others are still read
