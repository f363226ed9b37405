"""The plugins listed, the options they add to a parser and the targets of swanlab, trackio and
console, and which of their tracker libraries that imported (tests/backends/test_swanlab.py,
test_plugins_list_options_and_targets_import_no_tracker): one JSON line.

Usage: python swanlab_plugins.py TRACKING_DIR SWANLAB_API_KEY
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import tracking_core
from tracking_core import RunContext
from tracking_core.plugins import get_plugin_manager

tracking_dir, api_key = sys.argv[1], sys.argv[2]
specs = get_plugin_manager().backends
added = tracking_core.add_tracking_options(argparse.ArgumentParser()).added
targets: dict[str, Any] = {}
for name in ("swanlab", "trackio", "console"):
    ctx = RunContext(
        backend=name,
        run_id="job-1",
        name="ppo",
        primary=True,
        tracking_dir=Path(tracking_dir),
        options={"swanlab_api_key": api_key, "swanlab_project": "tc"},
    )
    target = specs[name].resolve_target()
    assert target is not None, f"backend {name!r} declares no target"
    targets[name] = target(ctx)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("swanlab", "trackio"))
print(json.dumps({"listed": sorted(specs), "added": added, "targets": targets, "heavy": heavy}))
