"""What ``import tracking_core`` imports (tests/core/test_light_import.py,
test_import_tracking_core_imports_only_the_accelerate_name_hook): prints, as JSON, the
tracking-core modules it imported and which of the modules named it imported.

Usage: python light_import_eager.py MODULE...
"""

from __future__ import annotations

import json
import sys

heavy = sys.argv[1:]
before = set(sys.modules)
import tracking_core  # noqa: E402, F401 - what is measured

new = set(sys.modules) - before
print(json.dumps({"ours": sorted(m for m in new if m.split(".")[0] == "tracking_core"),
                  "heavy": sorted(m for m in heavy if m in new)}))
