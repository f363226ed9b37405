"""A trackio role attaching before and after the primary opened the run
(tests/backends/test_trackio.py, test_a_role_attaches_only_once_the_primary_opened): prints what
the first attach did as JSON.

Usage: python trackio_attach_order.py TRACKING_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tracking_trackio.backend import TrackioBackend
from tracking_trackio.options import target

from tracking_core import RunContext, RunNotOpenYet

td = Path(sys.argv[1])
primary = RunContext(backend="trackio", run_id="job-9", name="ppo", primary=True, tracking_dir=td)
actor = RunContext(
    backend="trackio",
    run_id="job-9",
    name="ppo",
    primary=False,
    role="actor",
    label="actor-r0-p1",
    tracking_dir=td,
)
where = target(primary)
try:
    TrackioBackend(actor).attach_run(run=actor, attach=where)
except RunNotOpenYet as exc:
    first = "not open: " + str(exc)
else:
    first = "attached"
p = TrackioBackend(primary)
p.open_run(run=primary, target=where)
a = TrackioBackend(actor)
a.attach_run(run=actor, attach=where)
print(json.dumps({"first": first}))
