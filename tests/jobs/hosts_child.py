"""A child interpreter of a job (tests/core/test_hosts.py): prints, as JSON, whether the acme
host was imported, whether the entry points were read (importlib.metadata) and whether
tracking-core was imported, by the bootstrap on its PYTHONPATH.

Usage: python hosts_child.py
"""

from __future__ import annotations

import json
import sys

print(json.dumps({"imported": getattr(sys, "acme_imported", False),
                  "metadata": "importlib.metadata" in sys.modules,
                  "tracking_core": "tracking_core" in sys.modules}))
