"""Each named backend's target, computed through the spec its plugin registered, and the tracker
libraries that computing them imported (tests/backends/test_targets.py,
test_targets_import_no_tracker_and_carry_no_credential): one JSON line.

Usage: python targets.py TRACKING_DIR WANDB_KEY BACKEND [BACKEND ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import tracking_core
from tracking_core import RunContext

tracking_dir, wandb_key, names = sys.argv[1], sys.argv[2], sys.argv[3:]
specs = tracking_core.get_plugin_manager().backends
out: dict[str, Any] = {}
for name in names:
    ctx = RunContext(
        backend=name,
        run_id="job-1",
        name="ppo",
        primary=True,
        tracking_dir=Path(tracking_dir),
        options={"wandb_key": wandb_key, "wandb_group": "g"},
    )
    target = specs[name].resolve_target()
    assert target is not None, f"backend {name!r} declares no target"
    out[name] = target(ctx)
heavy = sorted(
    m
    for m in sys.modules
    if m.split(".")[0] in ("mlflow", "wandb", "tensorboardX", "tensorboard", "torch")
)
print(json.dumps({"targets": out, "heavy": heavy}))
