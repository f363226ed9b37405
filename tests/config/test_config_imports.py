"""The pipeline, and each tracker's shaping rules in its plugin, import no tracker (nor torch,
numpy, OmegaConf, pydantic), at import or call time."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HEAVY = [
    "mlflow",
    "wandb",
    "tensorboardX",
    "tensorboard",
    "torch",
    "numpy",
    "megatron",
    "ray",
    "omegaconf",
    "pydantic",
    "yaml",
]


def test_no_heavy_imports() -> None:
    script = textwrap.dedent(
        f"""
        import json, sys
        import tracking_core.records
        before = set(sys.modules)
        import tracking_core.config as c
        # each tracker's shaping rules live in its plugin, as cheap as the pipeline
        from tracking_mlflow.keys import mlflow_params
        from tracking_tensorboardx.hparams import tensorboard_hparams
        from tracking_wandb.config import wandb_config
        data = json.load(open({str(ROOT / "tests/fixtures/slime_ppo_args.json")!r}))
        for role, ns in (("actor", data["actor"]), (None, data["base"])):
            s = c.build_section(ns, role, "slime")
            mlflow_params(s).batches(); wandb_config(s); tensorboard_hparams(s)
            c.config_text(s); c.config_json(s)
        c.diff_configs(data["actor"], data["critic"])
        c.redact_argv(["--wandb-key", "x"])
        new = sorted({{m.split(".")[0] for m in set(sys.modules) - before}})
        print(json.dumps(new))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    new = json.loads(result.stdout.strip().splitlines()[-1])
    assert not set(new) & set(HEAVY), new
