"""Whether the plugin ``noisy`` is disabled and whether its module was imported, as JSON
(tests/core/test_plugins.py, test_disabled_plugin_is_never_imported).

Usage: TRACKING_CORE_DISABLE_PLUGINS=... python plugins_disabled.py
"""

from __future__ import annotations

import json
import sys

from tracking_core.plugins import get_plugin_manager

info = get_plugin_manager().plugins["noisy"]
print(json.dumps({"disabled": info.disabled, "loaded": "noisy_plugin" in sys.modules}))
