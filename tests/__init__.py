"""tracking-core's test suite (a regular package: an installed distribution may ship a top-level ``tests`` package too)."""
