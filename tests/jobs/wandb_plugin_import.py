"""Imports the W&B plugin's modules and adds the tracking options to a parser
(tests/backends/test_wandb.py, test_import_does_not_import_wandb): prints whether the wandb
backend is registered and whether wandb itself was imported.

Usage: python wandb_plugin_import.py
"""

from __future__ import annotations

import argparse
import sys

import tracking_wandb  # noqa: F401 - importing the plugin is what is checked
import tracking_wandb.options  # noqa: F401
import tracking_wandb.rows  # noqa: F401

import tracking_core
from tracking_core.plugins import get_plugin_manager

specs = get_plugin_manager().backends
tracking_core.add_tracking_options(argparse.ArgumentParser())
print("wandb" in specs, "wandb" in sys.modules)
