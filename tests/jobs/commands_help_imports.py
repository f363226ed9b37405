"""``tracking-core --help`` in this process (tests/core/test_commands.py,
test_help_lists_the_demo_without_importing_it_or_any_tracker): prints, as JSON, the demo's and
the trackers' modules it imported and whether the help names the demo.

Usage: python commands_help_imports.py
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from tracking_core.cli import main

with contextlib.redirect_stdout(io.StringIO()) as text:
    try:
        main(["--help"])
    except SystemExit:
        pass
heavy = ("slime_integration.demo", "torch", "mlflow", "wandb", "tensorboardX", "megatron")
print(json.dumps([sorted(m for m in sys.modules if m.startswith(heavy)), "demo" in text.getvalue()]))
