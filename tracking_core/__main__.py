"""``python -m tracking_core``: the ``tracking-core`` command, where its console script is not
installed (a checkout on ``PYTHONPATH``) or not on ``PATH``."""

import sys

from .cli import main

sys.exit(main())
