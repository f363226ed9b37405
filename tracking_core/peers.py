"""The primary's last duty before it closes the run: let the other writers finish delivering.

A host may end the job right after the driver's ``finish`` (Ray kills its actors when the driver
exits, too fast for their exit hooks), so the primary first waits — within its finish timeout —
until every live writer of this run on this node says, beside its journal, that everything it
logged is delivered; and it replays the leftover journals of writers that are already gone (as
``tracking-core sync`` would) while its own trackers are reachable. Writers on other nodes keep
their journals on their own nodes: ``tracking-core sync`` there delivers what they could not.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from .journal import JOURNAL_DIR, locked_by_live_process, progress_path

log = logging.getLogger("tracking_core.peers")

POLL = 0.1


def _live(journal: Path) -> bool:
    try:
        return locked_by_live_process(journal)
    except OSError:
        return False


def _settled_since(journal: Path, since: float) -> bool:
    try:
        state = json.loads(progress_path(journal).read_text())
    except (OSError, ValueError):
        return False
    return bool(state.get("settled")) and float(state.get("updated", 0)) >= since


def await_peers(tracking_dir: str, run_id: str, own: Path | None, deadline: float, replay: bool) -> list[str]:
    """Wait until every other live writer's journal is settled, replay the dead ones'; returns
    the journals still unsettled at the deadline."""
    folder = Path(tracking_dir) / JOURNAL_DIR / run_id
    if not folder.is_dir():
        return []
    since = time.time()
    waiting: list[Path] = []
    for journal in sorted(folder.glob("*.jsonl")):
        if own is not None and journal == own:
            continue
        if _live(journal):
            waiting.append(journal)
        elif replay:
            from .sync import sync

            report = sync(journal, stream=None)
            for error in report.errors:
                log.warning("could not replay %s before closing the run: %s", journal.name, error)
    while waiting and time.monotonic() < deadline:
        waiting = [j for j in waiting if j.exists() and _live(j) and not _settled_since(j, since)]
        if waiting:
            time.sleep(POLL)
    if waiting:
        log.warning(
            "closing the run while %d writer(s) still deliver: %s",
            len(waiting),
            ", ".join(j.name for j in waiting),
        )
    return [str(j) for j in waiting]
