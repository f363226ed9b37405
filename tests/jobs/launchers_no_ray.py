"""The job's run id with no launcher variables set, and whether asking imported Ray
(tests/core/test_launchers.py, test_job_run_id_never_imports_ray).

Usage: python launchers_no_ray.py
"""

from __future__ import annotations

import sys

import tracking_core  # noqa: F401 - the package too imports no Ray
from tracking_core.launchers import job_run_id

print(job_run_id({}), "ray" in sys.modules)
