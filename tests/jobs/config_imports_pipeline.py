"""The config pipeline and each tracker's shaping rules run on a saved slime config
(tests/config/test_config_imports.py, test_no_heavy_imports): prints, as JSON, the top-level
modules they imported.

Usage: python config_imports_pipeline.py SLIME_ARGS_JSON
"""

from __future__ import annotations

import json
import sys

import tracking_core.records  # noqa: F401 - imported before the measure

before = set(sys.modules)
# each tracker's shaping rules live in its plugin, as cheap as the pipeline
from tracking_mlflow.keys import mlflow_params  # noqa: E402
from tracking_tensorboardx.hparams import tensorboard_hparams  # noqa: E402
from tracking_wandb.config import wandb_config  # noqa: E402

import tracking_core.config as c  # noqa: E402 - what is measured

data = json.load(open(sys.argv[1]))
for role, ns in (("actor", data["actor"]), (None, data["base"])):
    s = c.build_section(ns, role, "slime")
    mlflow_params(s).batches()
    wandb_config(s)
    tensorboard_hparams(s)
    c.config_text(s)
    c.config_json(s)
c.diff_configs(data["actor"], data["critic"])
c.redact_argv(["--wandb-key", "x"])
new = sorted({m.split(".")[0] for m in set(sys.modules) - before})
print(json.dumps(new))
