"""Imports the TensorBoard plugin: no tracker library comes with it
(tests/backends/test_tensorboard.py, test_plugin_import_is_cheap). Prints ``ok``.

Usage: python tensorboard_plugin_import.py
"""

from __future__ import annotations

import sys

import tracking_tensorboardx  # noqa: F401 - importing the plugin is what is checked

import tracking_core

specs = tracking_core.get_plugin_manager().backends
assert specs["tensorboard"].extra == "tensorboard", specs
heavy = [m for m in ("tensorboardX", "torch", "tensorboard") if m in sys.modules]
assert not heavy, heavy
print("ok")
