"""Fixtures every test directory can use: a real `mlflow server` (session-wide, or per test)."""

import os

pytest_plugins = ["tests.helpers.mlflow_server"]

# Ray turns token authentication on for every new local cluster that ``ray.init()`` starts: it
# writes ~/.ray/auth_token and sets RAY_AUTH_MODE=token in this process, where it stays for the
# rest of the session (and in Ray's cached config). A later cluster whose nodes are not started by
# ``ray.init()`` (``ray start`` on a simulated node) then neither sends nor expects that token, and
# every Ray test after the first fails to connect. The tests' clusters are local and short-lived:
# all of them, and every process they start, run without tokens.
os.environ["RAY_AUTH_MODE"] = "disabled"
