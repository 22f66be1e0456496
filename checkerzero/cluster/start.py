"""Starting Ray, the one way every part of the project does it.

`start_ray` joins a running cluster when one is reachable (``address="auto"`` or an explicit
address), else starts a private local one. Its workers get the checkout on ``PYTHONPATH``, so a
source checkout runs on a cluster without an install.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]


def start_ray(
    address: str | None = "auto",
    *,
    num_cpus: int | None = None,
    include_dashboard: bool = False,
    object_store_memory_mb: int | None = None,
    log_to_driver: bool = True,
) -> bool:
    """Joins a running cluster if one is reachable, else starts a local one; True if started.

    ``address``: ``"auto"`` (a running cluster, else a local one), ``"local"`` or None (always a
    local one), or a cluster's address (joined; ConnectionError if it is not there). The other
    arguments configure a locally started Ray only. Nothing happens if Ray is already running.
    """
    # Ray takes 1.7-2.2 s to import (measured here): paid only by callers that start it.
    import ray

    if ray.is_initialized():
        return False
    env = {
        "env_vars": {
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])
            )
        }
    }
    if address and address != "local":
        try:
            ray.init(address=address, runtime_env=env, log_to_driver=log_to_driver)
            logger.info("joined the Ray cluster at %s", address)
            return False
        except ConnectionError:
            if address != "auto":
                raise
    # address="local": a plain ray.init() would join whatever cluster the machine's
    # /tmp/ray/ray_current_cluster names (the last `ray start` or test cluster), and then fail
    # because num_cpus cannot be given to an existing cluster.
    memory = None if object_store_memory_mb is None else int(object_store_memory_mb) * 1024 * 1024
    ray.init(
        address="local",
        num_cpus=num_cpus,
        include_dashboard=include_dashboard,
        object_store_memory=memory,
        runtime_env=env,
        log_to_driver=log_to_driver,
    )
    logger.info("started a local Ray (%s CPUs)", ray.cluster_resources().get("CPU"))
    return True
