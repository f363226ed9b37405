"""slime's driver after the slime adapter's install() (tests/slime/test_install.py,
test_a_child_process_of_the_driver_uses_the_drop_ins): starts the run through slime's own
call site, runs the job file CHILD in a fresh interpreter, finishes, and prints, as JSON,
whether its init_tracking is the adapter's and what the child said.

Usage: python install_slime_driver.py TRACKING_DIR CHILD
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from slime_integration import install

install.install()

import train  # noqa: E402 - slime's, once the adapter is installed
from slime.observability import logging_utils  # noqa: E402

from slime_integration import tracking  # noqa: E402

args = argparse.Namespace(lr=1e-6, use_wandb=False, use_tensorboard=False, wandb_key=None,
                          wandb_run_id=None, megatron_config_path=None,
                          tracking_backends="jsonl", tracking_dir=sys.argv[1])
logging_utils.init_tracking(args)
child = subprocess.run([sys.executable, sys.argv[2]], capture_output=True, text=True)
logging_utils.finish_tracking(args)
print(json.dumps({
    "driver": train.init_tracking is tracking.init_tracking,
    "child": child.stdout, "child_err": child.stderr[-2000:], "child_rc": child.returncode,
}))
