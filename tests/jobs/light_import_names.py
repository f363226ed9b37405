"""Every public name of tracking_core, ``hookimpl`` included, on first use
(tests/core/test_light_import.py, test_every_public_name_and_submodule_is_there_on_first_use):
prints, as JSON, each name's type, whether the marker marks, the settings submodule's name, the
error for a name that is not there and whether pluggy got imported.

Usage: python light_import_names.py
"""

from __future__ import annotations

import json
import sys
from typing import Any

import tracking_core
from tracking_core import *  # noqa: F403 - every public name, as a user's star import

names = {n: type(getattr(tracking_core, n)).__name__ for n in tracking_core.__all__}
marker = tracking_core.hookimpl


@marker
def open_run(run: Any) -> None: ...


try:
    tracking_core.no_such_thing  # noqa: B018 - a name that is not there
except AttributeError as exc:
    missing = str(exc)
print(json.dumps({"names": names, "marked": hasattr(open_run, "tracking_core_impl"),
                  "same": tracking_core.hookimpl is marker,
                  "settings": tracking_core.settings.__name__, "missing": missing,
                  "pluggy": "pluggy" in sys.modules}))
