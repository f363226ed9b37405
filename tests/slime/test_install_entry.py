"""``slime_integration.install()`` works however the name is reached, in a fresh interpreter
(a package attribute that only exists after some other import is exactly the bug this guards)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.subprocess_python import run_python

STAND_IN = Path(__file__).resolve().parent / "stand_in"

# The child prints what a user would check: the hook is active, the variable is set, and
# slime's init_tracking imported afterwards is the drop-in.
CHECK = """
import os, sys
import slime_integration.install as module
from slime_integration import tracking
import slime.observability.logging_utils as lu
assert module.is_active(), "import hook not active"
assert os.environ.get("TRACKING_CORE_SLIME") == "1", os.environ.get("TRACKING_CORE_SLIME")
assert lu.init_tracking is tracking.init_tracking, lu.init_tracking
print("OK")
"""

WAYS = {
    "attribute of the package": "import slime_integration\nslime_integration.install()",
    "from-import": "from slime_integration import install\ninstall()",
    "function of the submodule": "from slime_integration.install import install\ninstall()",
    "after another name": (
        "import slime_integration\nslime_integration.uninstall\nslime_integration.install()"
    ),
    "submodule imported first": (
        "import slime_integration.install\nimport slime_integration\nslime_integration.install()"
    ),
}


@pytest.mark.parametrize("way", sorted(WAYS))
def test_install_works_however_reached(way: str) -> None:
    code = (
        "import logging\n"
        "logging.basicConfig(level=logging.INFO, format='%(levelname)s %(name)s: %(message)s')\n"
        + WAYS[way]
        + "\n"
        + CHECK
    )
    done = run_python(code, site=STAND_IN, drop=("TRACKING_CORE_*",))
    assert done.stdout.strip().endswith("OK"), done.stdout
    lines = [
        line for line in done.stderr.splitlines() if line.startswith("INFO tracking_core.slime.install")
    ]
    assert len(lines) == 1, done.stderr
    line = lines[0]
    # says what was installed and where it reaches
    for part in ("init_tracking/log/finish_tracking", "slime.observability.logging_utils",
                 "slime.utils.arguments", "log_rollout_data/log_eval_rollout_data of slime.observability.rollout_metrics",
                 "child processes follow", "TRACKING_CORE_SLIME=1"):  # fmt: skip
        assert part in line, line


def test_install_logs_modules_patched_on_the_spot() -> None:
    code = (
        "import logging\nlogging.basicConfig(level=logging.INFO)\n"
        "import slime.observability.logging_utils\n"
        "import slime_integration\nslime_integration.install(children=False)\n"
        "import os\nassert 'TRACKING_CORE_SLIME' not in os.environ\n"
    )
    done = run_python(code, site=STAND_IN, drop=("TRACKING_CORE_*",))
    assert "replaced now in slime.observability.logging_utils" in done.stderr, done.stderr
    assert "this process only" in done.stderr, done.stderr


def test_python_m_install_prints_launch_lines_without_warning() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "slime_integration.install"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "export TRACKING_CORE_SLIME=1" in done.stdout
    assert "RuntimeWarning" not in done.stderr
