"""tracking_core.entry_points finds what importlib.metadata finds, in the same order: one
distribution per name (the first on sys.path), entry points in file order, names and versions
from the metadata headers; a path it cannot search alone is left to importlib.metadata."""

from __future__ import annotations

import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from tracking_core import entry_points as eps


def _dist(site: Path, folder: str, name: str, text: str, meta: str = "METADATA") -> None:
    info = site / folder
    info.mkdir(parents=True)
    version = folder.split("-")[1].rsplit(".", 1)[0]  # Acme_Plugin-2.0.dist-info: 2.0
    (info / meta).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody: text\n")
    (info / "entry_points.txt").write_text(text)


def _seen(found: list) -> list[tuple[str, str, str | None, str | None]]:
    return [(e.name, e.value, e.dist.metadata["Name"], e.dist.version) for e in found]


def test_the_same_entry_points_as_importlib_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "Acme_Plugin-2.0.dist-info", "acme-plugin", "# a comment\n[tracking_core]\nacme = acme_mod:Thing\n zeta=zeta_mod \n[other]\nx = y\n")
    _dist(second, "acme.plugin-1.0.dist-info", "acme.plugin", "[tracking_core]\nold = old_mod\n")  # shadowed
    _dist(second, "beta-1.5.egg-info", "beta", "[tracking_core]\nbeta = beta_mod:attr.inner [extra]\n", meta="PKG-INFO")
    _dist(second, "gamma-3.0.dist-info", "gamma", "[console_scripts]\ng = gamma:main\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second), *sys.path])
    for group in ("tracking_core", "other", "console_scripts"):
        assert _seen(eps.entry_points(group)) == _seen(list(metadata.entry_points(group=group)))
    ours = _seen(eps.entry_points("tracking_core"))
    assert ours[:3] == [("acme", "acme_mod:Thing", "acme-plugin", "2.0"), ("zeta", "zeta_mod", "acme-plugin", "2.0"),
                        ("beta", "beta_mod:attr.inner [extra]", "beta", "1.5")]


def test_load_imports_the_module_and_follows_the_attributes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    _dist(site, "loadme-1.0.dist-info", "loadme", "[tracking_core]\nwhole = loadme_mod\npart = loadme_mod:Outer.inner\n")
    (site / "loadme_mod.py").write_text("class Outer:\n    inner = 42\n")
    monkeypatch.syspath_prepend(str(site))
    found = {e.name: e for e in eps.entry_points("tracking_core")}
    assert found["whole"].load().__name__ == "loadme_mod"
    assert found["part"].load() == 42


def test_a_zip_on_the_path_is_left_to_importlib_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "zipped.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped\nVersion: 1.0\n")
        zf.writestr("zipped-1.0.dist-info/entry_points.txt", "[tracking_core]\nzipped = zipped_mod\n")
    monkeypatch.setattr(sys, "path", [str(archive), *sys.path])
    assert ("zipped", "zipped_mod", "zipped", "1.0") in _seen(eps.entry_points("tracking_core"))
