"""Simulated nodes for every test here (see tests/helpers/nodes.py)."""

from tests.helpers.nodes import simulated_nodes  # noqa: F401
