"""attach() with neither a run handle nor a job id: prints the error
(tests/core/test_launchers.py, test_attach_without_handle_or_job_id_names_the_job_id_variables).

Usage: python launchers_no_handle.py
"""

from __future__ import annotations

import tracking_core

try:
    tracking_core.attach(role="actor")
except ValueError as exc:
    print(exc)
