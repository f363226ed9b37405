"""A plugin in a distribution of its own (tracking-acme) whose backend needs a package with
another import name (tests/cli/test_cli_as_documented.py,
test_a_third_party_plugins_extra_is_its_own_distributions): copied into the test's site
directory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import tracking_core

if TYPE_CHECKING:
    from tracking_core.plugin_api import BackendRegistrar


@tracking_core.hookimpl
def register_backends(register: BackendRegistrar) -> None:
    from tracking_core.plugin_api import Backend

    register(Backend("acme", "tracking_acme:Backend", requires=["acme_sdk"], extra="sdk"))
