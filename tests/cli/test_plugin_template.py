"""The plugin template in examples/plugin-template: installed as a real distribution, found
through its entry point, listed by ``tracking-core plugins`` and used by a run; the README's
plugin section shows it as it is."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.subprocess_python import JOBS, run_python
from tests.helpers.template import TEMPLATE, install_template
from tracking_core import cli, hookimpl
from tracking_core.plugins import get_plugin_manager, reset_plugin_manager

ROOT = Path(__file__).resolve().parents[2]

TRAIN = JOBS / "plugin_template_train.py"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template built and installed by pip (no network, no dependencies) into a folder that
    goes on PYTHONPATH: a distribution with its metadata and entry point, as `pip install` makes."""
    site = install_template(tmp_path_factory.mktemp("template"))
    assert list(site.glob("tracking_core_acme-*.dist-info/entry_points.txt"))
    return site


@pytest.mark.slow
def test_template_installs_lists_and_runs(installed: Path, tmp_path: Path) -> None:
    found = run_python(
        "from importlib import metadata\n"
        "print([ep.value for ep in metadata.entry_points(group='tracking_core') if ep.name == 'acme'])",
        site=installed,
    )
    assert found.stdout.strip() == "['tracking_acme']"

    listed = run_python(
        "import sys; from tracking_core import cli; sys.exit(cli.main(['plugins', '--json']))",
        site=installed, drop=("TRACKING_CORE_*",),
    )  # fmt: skip
    (row,) = [r for r in json.loads(listed.stdout) if r["name"] == "acme"]
    assert row["distribution"] == "tracking-core-acme" and row["backends"] == ["acme"]
    assert row["error"] is None and row["missing"] == {}

    done = run_python(
        TRAIN,
        args=["--tracking-backends", "acme", "--tracking-dir", str(tmp_path)],
        site=installed, drop=("TRACKING_CORE_*",), cwd=tmp_path,
    )  # fmt: skip
    run_id = done.stdout.strip().splitlines()[-1]
    files = {p.name.split("-")[0]: p for p in (tmp_path / "acme" / run_id).glob("*.jsonl")}
    assert sorted(files) == ["actor", "primary"], sorted(files)  # one file per process label
    primary = [json.loads(line) for line in files.pop("primary").read_text().splitlines()]
    assert [o["type"] for o in primary][0] == "open"
    assert primary[-1] == {"type": "close", "status": "FINISHED", "primary": True}
    assert any(o["type"] == "config" and o["params"].get("lr") == 1e-6 for o in primary)
    (actor_file,) = files.values()  # the actor's writer: its own label
    actor = [json.loads(line) for line in actor_file.read_text().splitlines()]
    metrics = [o for o in actor if o["type"] == "metric" and o["name"] == "actor/train/loss"]
    assert [(m["step"], m["value"]) for m in metrics] == [(0, 1.0), (1, 0.5), (2, 1.0 / 3)]
    assert any(o["type"] == "config" and o["params"].get("actor/lr") == 2e-6 for o in actor)


def _code_blocks(markdown: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", markdown, flags=re.S)


def test_readme_plugin_section_is_the_template() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Writing a plugin", 1)[1].split("\n## ", 1)[0]
    module = (TEMPLATE / "tracking_acme.py").read_text(encoding="utf-8")
    pyproject = (TEMPLATE / "pyproject.toml").read_text(encoding="utf-8")
    python = _code_blocks(section, "python")
    toml = _code_blocks(section, "toml")
    assert python and toml, "the README's plugin section lost its code"
    # each snippet names the template file it comes from on its first line; the rest is verbatim
    sources = {
        "# examples/plugin-template/tracking_acme.py": module,
        "# examples/plugin-template/pyproject.toml": pyproject,
    }
    shown = 0
    for block in [*python, *toml]:
        first, _, rest = block.partition("\n")
        label = first.split(" (")[0]
        if label in sources:
            assert rest in sources[label], f"README's snippet of {label[2:]} is not verbatim"
            shown += 1
    assert shown >= 2, "the README shows no snippet of the template"
    assert "examples/plugin-template" in section


class _NeedsSdk:
    @hookimpl
    def register_backends(self, register) -> None:  # type: ignore[no-untyped-def]
        from tracking_core.plugin_api import Backend
        register(Backend("needs-sdk", "builtins:object", requires=["no_such_sdk_for_tests"], extra="acme"))


def test_plugins_shows_a_backends_missing_requirements(capsys: pytest.CaptureFixture[str]) -> None:
    reset_plugin_manager()
    manager = get_plugin_manager()
    manager.register(_NeedsSdk(), "needs-sdk-plugin")
    try:
        assert cli.main(["plugins"]) == 0
        out = capsys.readouterr().out
        block = out.split("needs-sdk-plugin", 1)[1].split("\n", 1)
        assert block[0].split()[1] == "MISSING", out
        assert "missing: tracking backend 'needs-sdk' needs no_such_sdk_for_tests" in block[1]
        assert 'pip install "tracking-core[acme]"' in block[1]
        # the same in --json, and the same sentence as selecting it at start
        assert cli.main(["plugins", "--json"]) == 0
        (row,) = [r for r in json.loads(capsys.readouterr().out) if r["name"] == "needs-sdk-plugin"]
        with pytest.raises(Exception) as exc:
            manager.select(["needs-sdk"])
        assert row["missing"] == {"needs-sdk": str(exc.value)}
        ok = [r for r in json.loads(_plugins_json(capsys)) if r["name"] == "jsonl"]
        assert ok and ok[0]["missing"] == {}
    finally:
        reset_plugin_manager()


def _plugins_json(capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["plugins", "--json"]) == 0
    return capsys.readouterr().out


@pytest.mark.slow
def test_template_with_a_missing_requirement(tmp_path: Path) -> None:
    """The template, told it needs a library that is not installed: `plugins` says MISSING and
    what to install; selecting it stops the start with that sentence (the CLI: one line, exit 2),
    before any process or tracker is started."""
    def needs_a_missing_library(source: Path) -> None:
        module = source / "tracking_acme.py"
        text = module.read_text(encoding="utf-8")
        assert 'requires=[],' in text
        module.write_text(text.replace("requires=[],", 'requires=["acme_sdk_not_installed"],'))

    site = install_template(tmp_path, needs_a_missing_library)
    message = (
        "tracking backend 'acme' needs acme_sdk_not_installed, which is not installed: "
        "pip install acme_sdk_not_installed"
    )
    listed = run_python(
        "import sys; from tracking_core import cli; sys.exit(cli.main(['plugins']))",
        site=site, drop=("TRACKING_CORE_*",),
    )  # fmt: skip
    block = listed.stdout.split("\nacme ", 1)[1] if not listed.stdout.startswith("acme ") else listed.stdout[5:]
    block = re.split(r"\n(?=\S)", block, maxsplit=1)[0]  # the acme row and its indented lines
    assert block.split()[1] == "MISSING", listed.stdout
    assert f"missing: {message}" in block, listed.stdout

    demo = run_python(
        "import sys; from tracking_core import cli; sys.exit(cli.main(sys.argv[1:]))",
        args=["demo", "--steps", "1", "--tracking-backends", "acme", "--tracking-dir", tmp_path / "runs"],
        site=site, drop=("TRACKING_CORE_*",), cwd=tmp_path, check=False,
    )  # fmt: skip
    assert demo.returncode == 2, demo.stdout + demo.stderr
    assert demo.stderr.strip().splitlines() == [f"tracking-core demo: {message}"], demo.stderr
    assert not (tmp_path / "runs").exists()  # nothing started, nothing written
