"""A plugin implementing a hook tracking-core does not have (tests/core/test_plugins.py,
test_broken_plugin_is_listed_others_keep_working), installed as the module ``stranger_plugin``.
"""

from __future__ import annotations

from typing import Any

import tracking_core


@tracking_core.hookimpl
def log_everything(records: Any) -> None:
    pass
