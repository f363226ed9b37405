"""Fixtures every test directory can use: a real `mlflow server` (session-wide, or per test)."""

pytest_plugins = ["tests.helpers.mlflow_server"]
