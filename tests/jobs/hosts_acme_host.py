"""The host adapter ``acme-rl`` of tests/core/test_hosts.py, installed as the module
``acme_host``: importing it marks ``sys``; activating it writes a line to the file $ACME_MARKER.
"""

from __future__ import annotations

import os
import sys

setattr(sys, "acme_imported", True)  # noqa: B010 - an attribute sys does not declare


def activate() -> None:
    open(os.environ["ACME_MARKER"], "a").write("activated\n")
