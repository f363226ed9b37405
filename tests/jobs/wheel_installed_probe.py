"""Where the installed package's modules come from (tests/install/test_wheel.py,
test_installed_from_the_wheel_not_the_checkout), run by the virtual environment's python from a
copy outside the checkout: prints, as JSON, the file of each module (the built-in plugins'
included), the bootstrap and the demo's roles file and whether they exist, the distribution's
direct_url.json and the interpreter's prefixes.

Usage: python wheel_installed_probe.py
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import json
import sys

dist = md.distribution("tracking-core")
mods = ["tracking_core", "slime_integration", "slime_integration.demo.driver",
        "verl_integration", "tracking_core.integrations.import_hook"]
mods += [ep.value for ep in md.entry_points(group="tracking_core")]
from slime_integration.demo.driver import DEFAULT_ROLES  # noqa: E402
from tracking_core.integrations.import_hook import BOOTSTRAP_DIR  # noqa: E402

print(json.dumps({
    "files": {m: importlib.import_module(m).__file__ for m in mods},
    "bootstrap": str(BOOTSTRAP_DIR / "sitecustomize.py"),
    "bootstrap_exists": (BOOTSTRAP_DIR / "sitecustomize.py").is_file(),
    "roles": str(DEFAULT_ROLES), "roles_exists": DEFAULT_ROLES.is_file(),
    "direct_url": json.loads(dist.read_text("direct_url.json") or "{}"),
    "prefix": sys.prefix, "base_prefix": sys.base_prefix,
}))
