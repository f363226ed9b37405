"""Host adapters are found through the ``tracking_core.hosts`` entry points: a host installed as a
distribution of its own is activated by the bootstrap in a child interpreter where its variable
(``TRACKING_CORE_<HOST>``) is set, is listed among the settings, and keeps the bootstrap on
``PYTHONPATH`` while its variable is set; nothing is read in an interpreter that asks for nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.subprocess_python import JOBS, run_python
from tracking_core.integrations import import_hook

ACME = (JOBS / "hosts_acme_host.py").read_text(encoding="utf-8")


@pytest.fixture
def acme_site(tmp_path: Path) -> Path:
    """A real installed distribution whose entry point declares the host ``acme-rl``."""
    site = tmp_path / "site"
    info = site / "acme_rl_tracking-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-rl-tracking\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[tracking_core.hosts]\nacme-rl = acme_host\n")
    (site / "acme_host.py").write_text(ACME)
    return site


CHILD = JOBS / "hosts_child.py"


def _child(site: Path, marker: Path, **env: str) -> dict[str, bool]:
    path = os.pathsep.join([str(import_hook.BOOTSTRAP_DIR), str(site)])
    out = run_python(CHILD, env={"PYTHONPATH": path, "ACME_MARKER": str(marker), **env}, drop=("TRACKING_CORE_*",))
    return json.loads(out.stdout)


def test_a_host_installed_through_its_entry_point_is_activated_in_children(acme_site: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    assert import_hook.host_variable("acme-rl") == "TRACKING_CORE_ACME_RL"
    assert _child(acme_site, marker, TRACKING_CORE_ACME_RL="1")["imported"]
    assert marker.read_text() == "activated\n"

    # asked for nothing: no entry point read, no host imported, tracking-core not imported
    assert _child(acme_site, marker) == {"imported": False, "metadata": False, "tracking_core": False}
    # another setting only: the entry points are read, the host is not imported
    assert _child(acme_site, marker, TRACKING_CORE_ACME_RL="0", TRACKING_CORE_DIR="/x")["imported"] is False
    assert marker.read_text() == "activated\n"


def test_a_host_entry_point_is_a_setting_and_keeps_the_bootstrap_for_its_children(acme_site: Path) -> None:
    out = run_python(
        JOBS / "hosts_settings.py",
        site=acme_site,
        drop=("TRACKING_CORE_*", "PYTHONPATH"),
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["hosts"] == {"acme-rl": "acme_host", "slime": "slime_integration.install", "verl": "verl_integration.install"}
    assert found["setting"] == "1: route acme-rl's tracking through tracking-core in every process (set by acme_host)"
    assert found["kept"] is True and found["verl"] is None
