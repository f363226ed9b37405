"""Stand-in for slime/utils/misc.py: ``load_function`` as slime defines it."""

import importlib


def load_function(path):
    module_path, _, attr = path.rpartition(".")
    module = importlib.import_module(module_path)
    return getattr(module, attr)
