"""The job's identity from its launcher: one run id that every process of the job derives alike.

Where a launcher names the job, every rank on every node can find the job's run without being
handed the run handle: :func:`job_run_id` turns the launcher's job identity into a run id, which
:func:`tracking_core.start_run` uses when it is given none and :func:`tracking_core.attach` uses
when it finds no handle (a tracker finds the run by that id: MLflow by its tag
``tracking_core.run_id``). In order:

========================================  ===================================  ==================
source                                    run id                               set by
========================================  ===================================  ==================
``$TRACKING_CORE_RUN_ID``                 its value                            you, once per job
``$TORCHELASTIC_RUN_ID`` (not ``none``)   ``torchelastic-<id>``                ``torchrun --rdzv-id``
``$SLURM_JOB_ID``                         ``slurm-<id>``                       SLURM
Ray's job (Ray initialised here)          ``ray-<session>-<job id>``           Ray
========================================  ===================================  ==================

Ray is asked only when this process has imported and initialised it: Ray is never imported
here. Its job id alone repeats across clusters (``01000000`` is every cluster's first job), so
the session's name goes with it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from . import settings

__all__ = ["JOB_ID_SOURCES", "job_run_id"]

ELASTIC = "TORCHELASTIC_RUN_ID"
SLURM = "SLURM_JOB_ID"
#: Where a job's identity is looked for, in order, as a reader would name them.
JOB_ID_SOURCES = (f"${settings.RUN_ID}", f"${ELASTIC}", f"${SLURM}", "Ray's job id (ray.init() in the process)")


def job_run_id(env: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """``(run id, where it came from)`` from the launcher's job identity, or None where the
    job has none. The same in every process of one job, and different across jobs."""
    own = env.get(settings.RUN_ID, "").strip()
    if own:
        return own, f"${settings.RUN_ID}"
    elastic = env.get(ELASTIC, "").strip()
    if elastic and elastic.lower() != "none":  # torchrun's default --rdzv-id is "none"
        return f"torchelastic-{elastic}", f"${ELASTIC}"
    slurm = env.get(SLURM, "").strip()
    if slurm:
        return f"slurm-{slurm}", f"${SLURM}"
    ray_job = _ray_job()
    if ray_job is not None:
        return ray_job, "Ray's job id (ray.get_runtime_context())"
    return None


def _ray_job() -> str | None:
    """``ray-<session>-<job id>`` when this process runs Ray (driver, actor or task)."""
    ray = sys.modules.get("ray")
    if ray is None:
        return None
    try:
        if not ray.is_initialized():
            return None
        context = ray.get_runtime_context()
        job = str(context.get_job_id())
        session = str(context.get_session_name())
    except Exception:  # noqa: BLE001 - a Ray that cannot say is a Ray without a job id
        return None
    if not job:
        return None
    return f"ray-{session.removeprefix('session_')}-{job}" if session else f"ray-{job}"
