"""``import tracking_core`` stays light: it imports no tracking-core module but the Accelerate
name hook's, neither pluggy nor any tracker; every public name, ``hookimpl`` included, and any
submodule reached as an attribute is imported on first use."""

from __future__ import annotations

import json

from tests.helpers.subprocess_python import run_python

#: What ``import tracking_core`` may import of the package itself.
EAGER = ["tracking_core", "tracking_core.integrations", "tracking_core.integrations.accelerate",
         "tracking_core.integrations.import_hook"]
#: Standard-library modules it must not pay for (each costs milliseconds).
HEAVY = ["pluggy", "json", "dataclasses", "socket", "argparse", "importlib.metadata", "importlib.abc",
         "inspect", "hashlib", "tempfile"]


def test_import_tracking_core_imports_only_the_accelerate_name_hook() -> None:
    out = run_python(
        f"""
        import json, sys
        before = set(sys.modules)
        import tracking_core
        new = set(sys.modules) - before
        print(json.dumps({{"ours": sorted(m for m in new if m.split(".")[0] == "tracking_core"),
                           "heavy": sorted(m for m in {HEAVY!r} if m in new)}}))
        """
    )
    assert json.loads(out.stdout) == {"ours": EAGER, "heavy": []}


def test_every_public_name_and_submodule_is_there_on_first_use() -> None:
    out = run_python(
        """
        import json, sys
        import tracking_core
        from tracking_core import *  # noqa: F403
        names = {n: type(getattr(tracking_core, n)).__name__ for n in tracking_core.__all__}
        marker = tracking_core.hookimpl
        @marker
        def open_run(run): ...
        try:
            tracking_core.no_such_thing
        except AttributeError as exc:
            missing = str(exc)
        print(json.dumps({"names": names, "marked": hasattr(open_run, "tracking_core_impl"),
                          "same": tracking_core.hookimpl is marker,
                          "settings": tracking_core.settings.__name__, "missing": missing,
                          "pluggy": "pluggy" in sys.modules}))
        """
    )
    got = json.loads(out.stdout)
    assert got["names"]["start_run"] == "function" and got["names"]["hookimpl"] == "HookimplMarker"
    assert got["names"]["RunStatus"] == "EnumType" and got["names"]["__version__"] == "str"
    assert got["marked"] and got["same"] and got["pluggy"]
    assert got["settings"] == "tracking_core.settings"
    assert got["missing"] == "module 'tracking_core' has no attribute 'no_such_thing'"
