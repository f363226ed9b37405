"""The job's run id in a Ray driver and in one of its tasks, with Ray's session and job id, as
JSON (tests/core/test_launchers.py, test_rays_job_id_is_the_same_in_the_driver_and_its_actors).

Usage: python launchers_ray_job_id.py
"""

from __future__ import annotations

import json
import os

import ray

from tracking_core.launchers import job_run_id

os.environ["RAY_AUTH_MODE"] = "disabled"
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)  # not a cluster on the machine


@ray.remote(num_cpus=0)
def in_a_task() -> tuple[str, str] | None:
    from tracking_core.launchers import job_run_id

    return job_run_id({})


driver = job_run_id({})
print(json.dumps({"driver": driver, "task": ray.get(in_a_task.remote()),
                  "session": ray.get_runtime_context().get_session_name(),
                  "job": ray.get_runtime_context().get_job_id()}))
ray.shutdown()
