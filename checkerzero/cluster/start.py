"""Starting Ray, the one way every part of the project does it.

`start_ray` joins a running cluster when one is reachable (``address="auto"`` or an explicit
address), else starts a private local one. Its workers get the checkout on ``PYTHONPATH``, so a
source checkout runs on a cluster without an install.

Authentication: a Ray this starts always runs with token authentication (Ray 2.60's default for
a local ``ray.init()``, here said explicitly, so Ray does not warn about it on every start); the
token is Ray's own file (``~/.ray/auth_token``, made on first use) or ``RAY_AUTH_TOKEN_PATH``.
Joining a cluster uses the token when one is configured; a cluster started with token
authentication refuses a client without it (docker/entrypoint.sh, deploy/).

A local Ray ends with this process, also when it is SIGKILLed: Ray's daemons do so by themselves,
and a watcher process (`checkerzero.cluster.reaper`) ends the agents that would linger.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from pathlib import Path

from checkerzero.cluster.reaper import start_watcher, watch_session

logger = logging.getLogger(__name__)

AUTH_MODE_VAR = "RAY_AUTH_MODE"  # Ray reads the mode from here only (not from its system config)
DEFAULT_TOKEN_FILE = Path.home() / ".ray" / "auth_token"  # where Ray keeps a generated token


def token_configured(environ: dict[str, str] | os._Environ = os.environ) -> bool:
    """Whether this process has a Ray token to present: RAY_AUTH_TOKEN, the file named by
    RAY_AUTH_TOKEN_PATH, or Ray's default token file."""
    if environ.get("RAY_AUTH_TOKEN"):
        return True
    path = environ.get("RAY_AUTH_TOKEN_PATH")
    return Path(path).is_file() if path else DEFAULT_TOKEN_FILE.is_file()


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
        if AUTH_MODE_VAR not in os.environ and token_configured():
            _token_mode()  # what Ray would choose, without its warning
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
    if AUTH_MODE_VAR not in os.environ:
        _token_mode()  # Ray's default for a local Ray, said aloud
    memory = None if object_store_memory_mb is None else int(object_store_memory_mb) * 1024 * 1024
    watcher = _new_watcher()
    ray.init(
        address="local",
        num_cpus=num_cpus,
        include_dashboard=include_dashboard,
        object_store_memory=memory,
        runtime_env=env,
        log_to_driver=log_to_driver,
    )
    logger.info("started a local Ray (%s CPUs)", ray.cluster_resources().get("CPU"))
    if watcher is not None:
        watch_session(watcher, ray._private.worker._global_node.get_session_dir_path())
    return True


# The watchers of the local Rays this process started, held for the life of the process: a
# watcher's pipe closing (this process gone, or a later start_ray) is what tells it to act.
_reapers: list[subprocess.Popen[bytes]] = []


def _new_watcher() -> subprocess.Popen[bytes] | None:
    """A watcher (`checkerzero.cluster.reaper`) that ends the Ray about to start once this
    process is gone; earlier ones, whose Ray was shut down, are let go: each ends what is left
    of its Ray."""
    for old in _reapers:
        with contextlib.suppress(OSError):
            if old.stdin is not None:
                old.stdin.close()
    watcher = start_watcher()
    if watcher is not None:
        _reapers.append(watcher)
    return watcher


def _token_mode() -> None:
    """Token authentication for this process and the Ray it starts: RAY_AUTH_MODE=token, and
    Ray's cached config refreshed (an imported Ray read the mode already). Ray's own function
    for it, pinned with Ray (pyproject.toml): the one Ray calls itself, minus the warning."""
    from ray._private.authentication.authentication_token_setup import _enable_token_auth

    _enable_token_auth()
