"""Imports the MLflow plugin and adds its options to a host's parser: mlflow itself stays
unimported (tests/backends/test_mlflow.py, test_importing_the_plugin_does_not_import_mlflow).
Prints ``ok``.

Usage: python mlflow_plugin_import.py
"""

from __future__ import annotations

import argparse
import sys

import tracking_mlflow  # noqa: F401 - importing the plugin is what is checked

import tracking_core
from tracking_core.options import add_tracking_options

manager = tracking_core.get_plugin_manager()
assert "mlflow" in manager.backends, manager.backends
parser = argparse.ArgumentParser()
parser.add_argument("--mlflow-experiment", dest="exp", default="host's")
host = add_tracking_options(parser)
ns = parser.parse_args(["--mlflow-tracking-uri", "http://x:1", "--mlflow-tags", "a=b"])
assert ns.mlflow_tracking_uri == "http://x:1" and ns.mlflow_tags == "a=b", ns
assert "--mlflow-experiment" in host.reused and ns.exp == "host's", host.reused
assert "mlflow" not in sys.modules, "importing the plugin imported mlflow"
print("ok")
