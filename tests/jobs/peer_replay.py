"""A primary and an ``actor`` writer in one process, the tracker unreachable from the actor's
delivery process and from the primary's replay of the actor's journal
(tests/faults/test_peer_replay.py): both finish summaries, the peers the primary's summary names
and the actor's journal.

Usage: python peer_replay.py TRACKING_DIR UNREACHABLE_FILE
"""

from __future__ import annotations

import os
import sys

from fault_prelude import report, summ

import tracking_core

td, unreachable = sys.argv[1], sys.argv[2]
run = tracking_core.start_run(backends=["faulty"], tracking_dir=td)
# From here on the tracker is unreachable from this process and the processes it starts: the
# primary's delivery process, started above, still reaches it.
os.environ["FAULT_DOWN_FILE"] = unreachable
actor = tracking_core.attach(role="actor", writer=True, collect=False)
for step in range(100):
    actor.log_metrics({"x": float(step)}, step=step)  # reaches trackers as actor/x
    run.log_metrics({"driver/y": float(step)}, step=step)
actor_summary = actor.finish(timeout=3)
summary = run.finish(timeout=20)
report(
    actor=summ(actor_summary),
    summary=summ(summary),
    peers=getattr(summary, "peers", None),
    actor_journal=str(actor.journal),
)
