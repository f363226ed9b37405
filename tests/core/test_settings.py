"""Every TRACKING_CORE_* variable is read in tracking_core/settings.py and listed in the docs."""

from __future__ import annotations

import re
from pathlib import Path

from tracking_core import settings

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"TRACKING_CORE_[A-Z_]+[A-Z]")


def test_every_variable_is_named_in_settings_and_documented() -> None:
    used: set[str] = set()
    for folder in ("tracking_core", "plugins", "slime_integration", "verl_integration"):
        for path in (ROOT / folder).rglob("*.py"):
            used |= set(NAME.findall(path.read_text()))
    assert used <= set(settings.ALL), sorted(used - set(settings.ALL))
    table = (ROOT / "docs" / "never-lose.md").read_text()
    listed = set(re.findall(r"^\| `(TRACKING_CORE_[A-Z_]+)` \|", table, re.M))
    assert listed == set(settings.ALL)


def test_only_the_settings_module_reads_them() -> None:
    reads = re.compile(r"os\.environ(?:\.get)?\(\s*[\"']TRACKING_CORE_|os\.environ\[\s*[\"']TRACKING_CORE_")
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "tracking_core").rglob("*.py")
        if p.name != "settings.py" and reads.search(p.read_text())
    ]
    assert offenders == []


def test_numbers_fall_back_with_a_warning(monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(settings.EXIT_TIMEOUT, "soon")
    assert settings.exit_timeout() == settings.DEFAULT_EXIT_TIMEOUT
    assert "TRACKING_CORE_EXIT_TIMEOUT" in caplog.text
    monkeypatch.setenv(settings.SEGMENT_BYTES, "10")
    assert settings.segment_bytes() == 4096  # never below one page
