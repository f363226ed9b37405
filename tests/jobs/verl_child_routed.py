"""A process started after the verl adapter's install() (a Ray worker, a torchrun rank)
(tests/hosts/test_verl.py, test_install_reaches_a_child_interpreter): checks that verl's tracking
is routed through tracking-core and prints "routed".

Usage: python verl_child_routed.py
"""

from __future__ import annotations

from verl.utils.tracking import Tracking, ValidationGenerationsLogger

from verl_integration import tracking

assert Tracking.__init__ is tracking.tracking_init, Tracking.__init__
assert ValidationGenerationsLogger.log is tracking.generations_log
assert "tracking_core" in Tracking.supported_backend
print("routed")
