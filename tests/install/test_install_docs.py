"""Every install line of the README and the docs works as written: tracking-core is on no public
package index, so a line installs it from the checkout (``.``, a path) or from a built wheel,
never by its name alone; no line pins torch (a user runs it in an environment that has its own
torch build: a pin would replace a CUDA build by another, or by the CPU one); and the README's
wheel command is the one tests/install/test_wheel.py runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted((ROOT / "examples").glob("*/README.md"))]  # fmt: skip
#: The README's command that builds the wheel (run in the checkout).
WHEEL_COMMAND = "python -m pip wheel --no-deps -w dist ."
#: A quoted missing-library message: its command is followed by the packages it installs.
MESSAGE_QUOTE = re.compile(r"^\s*\(it installs ")


def install_lines(text: str) -> list[tuple[str, str]]:
    """(the ``pip install`` command, the text right after it) in code blocks and code spans."""
    found: list[tuple[str, str]] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if "pip install" in command:
                found.append((command[command.index("pip install"):], ""))
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for match in re.finditer(r"`([^`\n]*pip install[^`\n]*)`", prose):
        command = match.group(1)
        found.append((command[command.index("pip install"):], prose[match.end():match.end() + 40]))
    return found


def by_name_only(command: str) -> list[str]:
    """The requirements of ``command`` that name tracking-core as a package to fetch by name."""
    words = shlex.split(command.replace("\\\n", " "))[2:]
    return [w for w in words if re.match(r"tracking[-_]core(\[|$|[<>=~!])", w, flags=re.I)]


def test_no_install_line_fetches_tracking_core_by_name() -> None:
    bad = []
    for page in PAGES:
        for command, after in install_lines(page.read_text(encoding="utf-8")):
            if by_name_only(command) and not MESSAGE_QUOTE.match(after):
                bad.append(f"{page.relative_to(ROOT)}: {command}")
    assert not bad, "install lines that fail off a public index:\n" + "\n".join(bad)


def pinned_torch(command: str) -> list[str]:
    """The requirements of ``command`` that pin torch to a version (``torch==2.13.0``, ``torch>=2``)."""
    words = shlex.split(command.replace("\\\n", " "))[2:]
    return [w for w in words if re.match(r"torch(\[[^\]]*\])?\s*[=<>~!]", w, flags=re.I)]


def test_no_install_line_pins_torch() -> None:
    bad = []
    for page in PAGES:
        for command, _after in install_lines(page.read_text(encoding="utf-8")):
            if pinned_torch(command):
                bad.append(f"{page.relative_to(ROOT)}: {command}")
    assert not bad, "install lines that would replace the user's torch:\n" + "\n".join(bad)


def test_the_checks_catch_a_pinned_torch() -> None:
    # what docs/hosts.md said before
    assert pinned_torch('pip install "torch==2.13.0" ".[verl,mlflow,tensorboard]"') == ["torch==2.13.0"]
    assert pinned_torch("pip install torch>=2.1 .") == ["torch>=2.1"]
    assert not pinned_torch('pip install ".[verl,mlflow,tensorboard]" torchdata')


def test_the_checks_catch_a_line_by_name() -> None:
    # the failing half of the scan: what the README said before
    text = 'needs the extra (`pip install "tracking-core[mlflow]"`).\n```bash\npip install tracking-core\n```\n'
    assert [by_name_only(c) for c, _ in install_lines(text)] == [["tracking-core"], ["tracking-core[mlflow]"]]
    assert not by_name_only('pip install ".[mlflow,wandb]"')
    assert not by_name_only('pip install "dist/tracking_core-0.1.0-py3-none-any.whl[mlflow]"')


def test_readme_install_section_is_what_the_wheel_test_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Install into your own environment", 1)[1].split("\n## ", 1)[0]
    commands = [c for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S)
                for c in (line.split("#", 1)[0].strip() for line in block.splitlines()) if c]  # fmt: skip
    assert WHEEL_COMMAND in commands
    assert 'pip install ".[mlflow,wandb]"' in commands
    wheel_installs = [c for c in commands if c.startswith("pip install") and ".whl[" in c]
    assert wheel_installs, "the README installs no built wheel"
    test_wheel = (Path(__file__).with_name("test_wheel.py")).read_text(encoding="utf-8")
    assert '"wheel", "--no-deps", "-w", "dist"' in test_wheel
