"""Selecting a backend whose plugin fails at import, then one that works
(tests/core/test_plugins.py, test_broken_plugin_is_listed_others_keep_working): prints the error
and that jsonl still works.

Usage: python plugins_broken_select.py TRACKING_DIR
"""

from __future__ import annotations

import sys

import tracking_core

try:
    tracking_core.start_run(backends=["broken"], tracking_dir=sys.argv[1])
except tracking_core.PluginLoadError as exc:
    print("ERROR:", exc)
ok = tracking_core.start_run(backends=["jsonl"], tracking_dir=sys.argv[1])
ok.finish()
print("jsonl still works")
