"""``import tracking_core`` stays light: it imports no tracking-core module but the Accelerate
name hook's, neither pluggy nor any tracker; every public name, ``hookimpl`` included, and any
submodule reached as an attribute is imported on first use."""

from __future__ import annotations

import json

from tests.helpers.subprocess_python import JOBS, run_python

#: What ``import tracking_core`` may import of the package itself.
EAGER = ["tracking_core", "tracking_core.integrations", "tracking_core.integrations.accelerate",
         "tracking_core.integrations.import_hook"]
#: Standard-library modules it must not pay for (each costs milliseconds).
HEAVY = ["pluggy", "json", "dataclasses", "socket", "argparse", "importlib.metadata", "importlib.abc",
         "inspect", "hashlib", "tempfile"]


def test_import_tracking_core_imports_only_the_accelerate_name_hook() -> None:
    out = run_python(JOBS / "light_import_eager.py", args=HEAVY)
    assert json.loads(out.stdout) == {"ours": EAGER, "heavy": []}


def test_every_public_name_and_submodule_is_there_on_first_use() -> None:
    out = run_python(JOBS / "light_import_names.py")
    got = json.loads(out.stdout)
    assert got["names"]["start_run"] == "function" and got["names"]["hookimpl"] == "HookimplMarker"
    assert got["names"]["RunStatus"] == "EnumType" and got["names"]["__version__"] == "str"
    assert got["marked"] and got["same"] and got["pluggy"]
    assert got["settings"] == "tracking_core.settings"
    assert got["missing"] == "module 'tracking_core' has no attribute 'no_such_thing'"
