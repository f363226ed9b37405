"""The installed hosts, the acme host's setting and whether the bootstrap stays on PYTHONPATH
while its variable is set, after the verl host installs and uninstalls itself
(tests/core/test_hosts.py,
test_a_host_entry_point_is_a_setting_and_keeps_the_bootstrap_for_its_children): prints JSON.

Usage: python hosts_settings.py
"""

from __future__ import annotations

import json
import os

from tracking_core import settings
from tracking_core.integrations import import_hook
from verl_integration import install

install.install()
os.environ["TRACKING_CORE_ACME_RL"] = "1"
install.uninstall()
print(json.dumps({
    "hosts": import_hook.installed_hosts(),
    "setting": settings.ALL.get("TRACKING_CORE_ACME_RL"),
    "kept": str(import_hook.BOOTSTRAP_DIR) in os.environ.get("PYTHONPATH", ""),
    "verl": os.environ.get("TRACKING_CORE_VERL"),
}))
