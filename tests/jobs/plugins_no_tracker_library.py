"""Which of the libraries named are imported after ``import tracking_core`` and after listing the
plugins (tests/core/test_plugins.py, test_import_and_plugin_listing_import_no_tracker_library):
prints the two sorted lists.

Usage: python plugins_no_tracker_library.py LIBRARY...
"""

from __future__ import annotations

import contextlib
import io
import sys

import tracking_core  # noqa: F401 - what is measured

heavy = set(sys.argv[1:])
after_import = sorted({m.split(".")[0] for m in sys.modules} & heavy)
from tracking_core.cli import main  # noqa: E402 - imported after the first measure

with contextlib.redirect_stdout(io.StringIO()):
    main(["plugins"])
after_cli = sorted({m.split(".")[0] for m in sys.modules} & heavy)
print(after_import, after_cli)
