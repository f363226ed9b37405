"""The ``tracking-core`` command: a cheap parser, and clear answers for what it cannot do."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.helpers.subprocess_python import JOBS, run_python
from tracking_core import cli

HEAVY_PREFIXES = (
    "slime_integration",
    "tracking_jsonl",
    "tracking_mlflow",
    "tracking_wandb",
    "tracking_tensorboardx",
    "torch",
    "mlflow",
    "wandb",
)


def test_building_the_parser_imports_no_plugin_nor_adapter() -> None:
    out = run_python(JOBS / "cli_parser_imports.py", args=HEAVY_PREFIXES)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_demo_options_are_parsed_by_the_demo_when_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from slime_integration.demo import driver

    seen: list[argparse.Namespace] = []
    monkeypatch.setattr(driver, "run_demo", lambda args: seen.append(args) or 0)
    assert cli.main(["-v", "demo", "--steps", "3", "--tracking-backends", "jsonl"]) == 0
    (args,) = seen
    assert args.steps == 3 and args.tracking_backends == "jsonl" and args.actor_ranks == 2
    assert not {"func", "command", "verbose", "demo_argv"} & set(vars(args))


def test_other_commands_still_refuse_unknown_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["plugins", "--steps", "3"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --steps 3" in capsys.readouterr().err


@pytest.mark.parametrize("given", [True, False])
def test_sync_of_a_path_that_does_not_exist(tmp_path: Path, given: bool) -> None:
    missing = tmp_path / "no-such-dir"
    args = ["sync", str(missing)] if given else ["sync"]
    env = {} if given else {"TRACKING_CORE_DIR": str(missing)}
    result = run_python(
        "import sys; from tracking_core import cli; sys.exit(cli.main(sys.argv[1:]))",
        args=args,
        env=env,
        drop=("TRACKING_CORE_*",),
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert str(missing) in lines[0] and "does not exist" in lines[0]
    assert not missing.exists()



@pytest.mark.parametrize(
    ("argv", "env", "source", "suggestion"),
    [
        (["demo", "--tracking-backends", "mlfow"], {}, "--tracking-backends", "mlflow"),
        (["demo"], {"TRACKING_CORE_BACKENDS": "wandbb"}, "$TRACKING_CORE_BACKENDS", "wandb"),
    ],
)
def test_an_unknown_backend_is_one_line_naming_its_source_and_the_closest_name(
    argv: list[str], env: dict[str, str], source: str, suggestion: str, tmp_path: Path
) -> None:
    out = run_python(
        f"import sys; from tracking_core.cli import main; sys.exit(main({argv!r}))",
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    name = argv[-1] if not env else env["TRACKING_CORE_BACKENDS"]
    assert f"unknown tracking backend {name!r} (from {source}); did you mean {suggestion!r}?" in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing was started, nothing written


def test_a_misspelled_option_shows_the_subcommands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["sync", "--quite"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: tracking-core sync") and "unrecognized arguments: --quite" in err


def test_a_closed_pipe_is_no_traceback() -> None:
    """`tracking-core plugins | head -1`: the reader goes away; the command ends quietly."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "tracking_core.cli", "plugins"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # nobody reads what it prints
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
