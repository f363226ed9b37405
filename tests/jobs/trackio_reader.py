"""What trackio's own storage API says about PROJECT in ``$TRACKIO_DIR``: its projects, runs and
each run's logs (without timestamps), config and alerts, as JSON (tests/backends/test_trackio.py).

Usage: python trackio_reader.py PROJECT
"""

from __future__ import annotations

import json
import sys
from typing import Any

from trackio.sqlite_storage import SQLiteStorage as S

project = sys.argv[1]
runs = S.get_runs(project)
out: dict[str, Any] = {
    "projects": S.get_projects(),
    "runs": runs,
    "logs": {},
    "configs": {},
    "alerts": {},
}
for record in S.get_run_records(project):
    out["logs"][record["name"]] = [
        {k: v for k, v in row.items() if k != "timestamp"}
        for row in S.get_logs(project, run_id=record["id"])
    ]
    out["configs"][record["name"]] = S.get_run_config(project, run_id=record["id"])
    out["alerts"][record["name"]] = [
        {k: a[k] for k in ("title", "level")} for a in S.get_alerts(project, run_id=record["id"])
    ]
print(json.dumps(out, default=str))
