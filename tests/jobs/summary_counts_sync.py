"""``tracking-core sync`` of a tracking directory in this process, printing what each tracker
got as the CLI does (tests/faults/test_summary_counts.py,
test_a_config_section_the_summary_says_is_owed_is_what_sync_says_it_delivered); exits 1 on an
error.

Usage: python summary_counts_sync.py TRACKING_DIR
"""

from __future__ import annotations

import sys

from tracking_core.delivery.sync import sync

report = sync(sys.argv[1], stream=None, isolate=False)
print("\n".join(f"  {line}" for line in report.tracker_lines()))
sys.exit(1 if report.errors else 0)
