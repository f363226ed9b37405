"""Entry-point discovery with real installed distributions, each plugin under its own guard."""

from __future__ import annotations

import json
from pathlib import Path

from tests.core.conftest import make_dist
from tests.helpers.subprocess_python import JOBS, run_python

ACME = (JOBS / "plugins_acme.py").read_text(encoding="utf-8")


def test_hook_register_backends_third_party_dist_is_listed_and_selected(site: Path, tmp_path: Path) -> None:
    make_dist(site, "acme-tracking", {"acme": "acme_plugin"}, {"acme_plugin": ACME})
    log = tmp_path / "acme.log"
    listing = run_python(
        "from tracking_core.cli import main; main(['plugins', '--json'])",
        site=site,
        env={"ACME_LOG": str(log)},
    )
    plugins = {p["name"]: p for p in json.loads(listing.stdout)}
    assert plugins["acme"]["distribution"] == "acme-tracking"
    assert plugins["acme"]["version"] == "1.0"
    assert plugins["acme"]["backends"] == ["acme"]
    assert plugins["acme"]["kind"] == "backend,collector"
    assert "collect_config" in plugins["acme"]["hooks"]
    assert plugins["jsonl"]["error"] is None

    run_python(
        JOBS / "plugins_acme_run.py",
        args=[tmp_path / "td"],
        site=site,
        env={"ACME_LOG": str(log)},
    )
    events = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "open" and kinds.count("attach") == 1 and kinds.count("close") == 2
    configs = {e["role"]: e["params"] for e in events if e["event"] == "config"}
    assert configs[None]["lr"] == 0.5
    # the collector's part of the role's config reached the logged config of that role
    assert configs["actor"]["actor/acme_seed"] == 7
    assert configs["actor"]["actor/acme_role"] == "actor"
    metrics = [e for e in events if e["event"] == "metrics"]
    names = [n for e in metrics for n in e["names"]]
    steps = [s for e in metrics for s in e["steps"]]
    assert sorted(names) == sorted(["actor/loss", "actor/reward"] * 3)
    assert sorted(steps) == [0, 0, 1, 1, 2, 2]
    assert {a for e in metrics for a in e["axes"]} == {"actor/train/step"}
    attach = next(e for e in events if e["event"] == "attach")
    assert attach["attach"] == {"where": "acme://" + attach["attach"]["where"].split("//")[1]}
    assert attach["role"] == "actor"


def test_broken_plugin_is_listed_others_keep_working(site: Path, tmp_path: Path) -> None:
    make_dist(
        site,
        "broken-tracking",
        {"broken": "broken_plugin", "stranger": "stranger_plugin"},
        {
            "broken_plugin": "raise RuntimeError('boom at import')\n",
            "stranger_plugin": (JOBS / "plugins_stranger.py").read_text(encoding="utf-8"),
        },
    )
    listing = run_python("from tracking_core.cli import main; main(['plugins', '--json'])", site=site)
    plugins = {p["name"]: p for p in json.loads(listing.stdout)}
    assert "RuntimeError: boom at import" in plugins["broken"]["error"]
    assert plugins["broken"]["distribution"] == "broken-tracking"
    assert "log_everything" in plugins["stranger"]["error"]
    assert plugins["jsonl"]["error"] is None and plugins["jsonl"]["backends"] == ["jsonl"]

    text = run_python("from tracking_core.cli import main; main(['plugins'])", site=site)
    assert "FAILED" in text.stdout and "boom at import" in text.stdout

    selecting = run_python(
        JOBS / "plugins_broken_select.py",
        args=[tmp_path],
        site=site,
    )
    assert "ERROR: tracking backend 'broken' comes from plugin 'broken'" in selecting.stdout
    assert "boom at import" in selecting.stdout
    assert "jsonl still works" in selecting.stdout


def test_disabled_plugin_is_never_imported(site: Path, tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    make_dist(
        site,
        "noisy-tracking",
        {"noisy": "noisy_plugin"},
        {"noisy_plugin": f"open({str(marker)!r}, 'w').write('imported')\n"},
    )
    out = run_python(
        JOBS / "plugins_disabled.py",
        site=site,
        env={"TRACKING_CORE_DISABLE_PLUGINS": "noisy, other"},
    )
    assert json.loads(out.stdout) == {"disabled": True, "loaded": False}
    assert not marker.exists()
    # without the variable it is imported: the marker proves the check above can fail
    run_python("from tracking_core.plugins import get_plugin_manager; get_plugin_manager()", site=site)
    assert marker.exists()


HEAVY = ("wandb", "mlflow", "tensorboardX", "torch", "megatron", "ray")


def test_import_and_plugin_listing_import_no_tracker_library() -> None:
    out = run_python(JOBS / "plugins_no_tracker_library.py", args=HEAVY)
    assert out.stdout.strip() == "[] []"
