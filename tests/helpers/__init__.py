"""Test helpers: real tracker servers and readers shared by the test suites."""
