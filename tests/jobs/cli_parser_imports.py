"""Which modules of the prefixes given building the CLI's parser imports (tests/cli/test_cli.py,
test_building_the_parser_imports_no_plugin_nor_adapter): prints them, sorted, as JSON.

Usage: python cli_parser_imports.py PREFIX...
"""

from __future__ import annotations

import json
import sys

from tracking_core import cli

heavy = tuple(sys.argv[1:])
cli.build_parser()
print(json.dumps(sorted(m for m in sys.modules if m.startswith(heavy))))
