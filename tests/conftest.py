"""Fixtures every test directory can use: a real `mlflow server` (session-wide, or per test);
and how the suite is spread over pytest-xdist workers."""

import os
from typing import Any

import pytest

pytest_plugins = ["tests.helpers.mlflow_server"]

# Ray turns token authentication on for every new local cluster that ``ray.init()`` starts: it
# writes ~/.ray/auth_token and sets RAY_AUTH_MODE=token in this process, where it stays for the
# rest of the session (and in Ray's cached config). A later cluster whose nodes are not started by
# ``ray.init()`` (``ray start`` on a simulated node) then neither sends nor expects that token, and
# every Ray test after the first fails to connect. The tests' clusters are local and short-lived:
# all of them, and every process they start, run without tokens.
os.environ["RAY_AUTH_MODE"] = "disabled"


# -- running the suite on several workers (pytest-xdist, ``./run.sh test``) ---------------------
#
# ``./run.sh test`` runs the suite on several worker processes (pytest-xdist): most
# tests wait on subprocesses, servers and sleeps, not on this machine's cores. Three rules keep
# that safe and short:
#
# * a module whose tests share a module-scoped fixture (a built venv, a saved run, a Ray job)
#   runs on one worker, so that fixture is made once;
# * the tests that start Ray clusters run one after the other on one worker (one cluster at a
#   time on the machine, as they were written for);
# * the longest tests start first, so no worker is left with a long one at the end.

#: Tests that start a Ray cluster (nodeid prefixes): one worker runs them one at a time.
RAY_TESTS = (
    "tests/multinode/test_ray_nodes.py",
    "tests/slime/test_ray_topology.py",
    "tests/hosts/test_verl.py::test_tracking_built_in_a_ray_actor_is_routed",
    "tests/slime/test_install.py::test_ray_runtime_env_reaches_workers_that_inherit_nothing",
    "tests/core/test_launchers.py::test_rays_job_id_is_the_same_in_the_driver_and_its_actors",
)

#: Tests that share one run of the demo (tests/helpers/demo_run.py): one worker runs them.
DEMO_RUN_TESTS = (
    "tests/demo/test_demo.py::test_demo_logs_both_roles_to_all_three",
    "tests/demo/test_demo_commands.py::test_printed_commands_run_as_printed",
)

#: Modules whose tests share a module-scoped fixture (a built venv, a saved run): each module's
#: tests run on one worker, so the fixture is made once.
MODULE_FIXTURE_MODULES = (
    "tests/install/test_wheel.py",
    "tests/cli/test_show.py",
    "tests/cli/test_cli_as_documented.py",
    "tests/cli/test_ui.py",
    "tests/cli/test_show_kinds.py",
    "tests/cli/test_plugin_template.py",
    "tests/cli/test_third_party_tracker.py",
    "tests/slime/test_dropins.py",
    "tests/faults/test_recovery.py",
)

#: The longest tests and modules (nodeid prefixes), longest first: they start before the rest.
LONGEST_FIRST = (
    "tests/install/test_run_sh_setup.py",
    "tests/install/test_readme_install.py",
    "tests/install/test_wheel.py",
    "tests/demo/test_demo.py::test_demo_logs_both_roles_to_all_three",
    "tests/demo/test_demo_commands.py",
    "tests/cli/test_ui.py",
    "tests/cli/test_sync_progress.py",
    "tests/core/test_never_lose_mlflow.py",
    "tests/distributed/test_one_run.py",
    "tests/demo/",
    "tests/faults/test_registry_size.py",
    "tests/cli/test_show_kinds.py",
    "tests/slime/test_dropins.py",
    "tests/multinode/",
    "tests/core/test_report.py",
)


def work_unit(nodeid: str) -> str:
    """The unit of work pytest-xdist hands one worker: a group's name, else the test itself."""
    if nodeid.startswith(RAY_TESTS):
        return "ray"
    if nodeid.startswith(DEMO_RUN_TESTS):
        return "demo-run"
    module = nodeid.split("::", 1)[0]
    return module if module in MODULE_FIXTURE_MODULES else nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's load scheduling over the groups of :func:`work_unit` (its own
    ``xdist_group`` marks are not seen under pytest 9: it renames ``item._nodeid``)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        for i, prefix in enumerate(LONGEST_FIRST):
            if item.nodeid.startswith(prefix):
                return i
        return len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order
