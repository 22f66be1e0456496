"""Starting Ray, the one way every part of the project does it.

`start_ray` joins a cluster the user started, else starts a private local one. With
``address="auto"`` the cluster joined is one the user named: ``RAY_ADDRESS``, else the one the
last ``ray start`` on this machine recorded (Ray's ``ray_current_cluster`` file, removed by
``ray stop``) when it still answers. Ray's own "auto" would also join any Ray found by scanning
the process table, such as another program's private one, and then die or hang with it; so Ray
is never handed "auto" here, only the address found. Its workers get the checkout on
``PYTHONPATH``, so a source checkout runs on a cluster without an install.

A joined cluster that goes away ends this process with one line (`ClusterWatch`): Ray's own
client would retry for a minute or more, failing every call.

Authentication: a Ray this starts always runs with token authentication (Ray 2.60's default for
a local ``ray.init()``, here said explicitly, so Ray does not warn about it on every start); the
token is one made for that Ray alone and held in the environment of its processes (so another
program of the same user, holding Ray's shared token file, cannot join it), unless the user
named one (``RAY_AUTH_TOKEN`` or ``RAY_AUTH_TOKEN_PATH``).
Joining a cluster uses the token when one is configured; a cluster started with token
authentication refuses a client without it (docker/entrypoint.sh, deploy/).

A local Ray ends with this process, also when it is SIGKILLed: Ray's daemons do so by themselves,
and a watcher process (`checkerzero.cluster.reaper`) ends the agents that would linger.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
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


ADDRESS_VAR = "RAY_ADDRESS"  # Ray's variable naming the cluster to join
EXIT_CLUSTER_LOST = 3  # the exit status of a process whose joined cluster went away
PROBE_TIMEOUT_S = 1.0  # one connection attempt to a GCS; a live one answers in milliseconds


def _ray_mark_file() -> Path:
    """Where ``ray start`` records the cluster it started (Ray's own path; Ray's temp dir may
    be moved with RAY_TMPDIR)."""
    from ray._common.utils import get_ray_address_file

    return Path(get_ray_address_file(None))


def answers(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether something accepts a connection at ``host:port`` (``ray://`` allowed)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def cluster_to_join(address: str | None, environ=os.environ) -> str | None:
    """The address of the cluster ``address`` asks to join, or None for a private local Ray.

    ``"local"`` or None: None. ``"auto"``: ``RAY_ADDRESS`` when set; else the cluster the last
    ``ray start`` recorded, when it answers (a stale record, left by a crashed cluster, is
    logged and passed over); else None. Never a Ray found by scanning processes. Anything else
    is an address, returned as it is."""
    if not address or address == "local":
        return None
    if address != "auto":
        return address
    named = environ.get(ADDRESS_VAR, "").strip()
    if named == "local":
        return None
    if named and named != "auto":  # RAY_ADDRESS=auto asks for the same search as here
        return named
    mark = _ray_mark_file()
    try:
        recorded = mark.read_text(encoding="utf-8").strip() if mark.is_file() else ""
    except (OSError, UnicodeDecodeError):
        recorded = ""
    if not recorded:
        return None
    if answers(recorded):
        return recorded
    logger.warning(
        "%s names a Ray cluster at %s that does not answer (it ended without `ray stop`); "
        "starting a private local Ray",
        mark,
        recorded,
    )
    return None


class ClusterWatch:
    """Ends this process, with one logged line, when the joined cluster at ``address`` stops
    accepting connections for ``lost_after_s``: a cluster that went away otherwise leaves the
    program retrying for a minute or more (Ray's client), failing every call meanwhile."""

    def __init__(self, address: str, lost_after_s: float, exit=os._exit) -> None:
        self.address = address
        self.lost_after_s = float(lost_after_s)
        self._exit = exit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ray-cluster-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        import ray  # imported by start_ray already

        period = max(0.2, min(1.0, self.lost_after_s / 3))  # several tries before giving up
        silent_since: float | None = None
        while not self._stop.wait(period):
            if not ray.is_initialized():  # shut down here: the cluster is no longer ours
                return
            if answers(self.address, min(PROBE_TIMEOUT_S, period)):
                silent_since = None
                continue
            now = time.monotonic()
            silent_since = silent_since or now
            if now - silent_since >= self.lost_after_s and not self._stop.is_set():
                logger.critical(
                    "the Ray cluster at %s went away (no answer for %.0f s); stopping",
                    self.address,
                    now - silent_since,
                )
                for handler in logging.getLogger().handlers:
                    with contextlib.suppress(Exception):
                        handler.flush()
                with contextlib.suppress(Exception):
                    sys.stderr.flush()
                self._exit(EXIT_CLUSTER_LOST)
                return


_watches: list[ClusterWatch] = []  # the watches of the clusters joined, stopped on a new start


def start_ray(
    address: str | None = "auto",
    *,
    num_cpus: int | None = None,
    include_dashboard: bool = False,
    object_store_memory_mb: int | None = None,
    log_to_driver: bool = True,
    lost_after_s: float = 5.0,
) -> bool:
    """Joins the cluster ``address`` names, else starts a private local one; True if started.

    ``address``: ``"auto"`` (the cluster `cluster_to_join` finds, else a private local one),
    ``"local"`` or None (always a private local one), or a cluster's address (joined;
    ConnectionError if it is not there). A joined cluster silent for ``lost_after_s`` ends
    the process (`ClusterWatch`). The other arguments configure a locally started Ray only.
    Nothing happens if Ray is already running.
    """
    # Ray takes 1.7-2.2 s to import (measured here): paid only by callers that start it.
    import ray

    if ray.is_initialized():
        return False
    while _watches:
        _watches.pop().stop()
    env = {
        "env_vars": {
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])
            )
        }
    }
    join = cluster_to_join(address)
    if join is not None:
        _drop_private_token()  # an earlier private Ray's, not the cluster's
        if AUTH_MODE_VAR not in os.environ and token_configured():
            _token_mode()  # what Ray would choose, without its warning
        ray.init(address=join, runtime_env=env, log_to_driver=log_to_driver)
        node = ray._private.worker._global_node  # None for a ray:// client
        watched = getattr(node, "gcs_address", None) or join
        _watches.append(ClusterWatch(watched, lost_after_s))
        logger.info("joined the Ray cluster at %s", join)
        return False
    # address="local": a plain ray.init() would join whatever cluster the machine's
    # /tmp/ray/ray_current_cluster names (the last `ray start` or test cluster), and then fail
    # because num_cpus cannot be given to an existing cluster.
    if AUTH_MODE_VAR not in os.environ:
        _token_mode()  # Ray's default for a local Ray, said aloud
    if os.environ.get(AUTH_MODE_VAR) == "token" and not _user_token():
        _private_token()  # a program that finds this Ray by scanning processes cannot join it
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


def stop_ray() -> None:
    """Shuts down the Ray `start_ray` started or joined, and forgets a private Ray's token: a
    later Ray of this process, or a program it starts, gets a token of its own."""
    import ray

    ray.shutdown()
    while _watches:
        _watches.pop().stop()
    _drop_private_token()


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


TOKEN_VAR = "RAY_AUTH_TOKEN"  # a token given in the environment (Ray reads it before any file)
_own_tokens: set[str] = set()  # the private tokens this process made


def _user_token() -> bool:
    """Whether the user named a token (in the environment) for Ray to use."""
    given = os.environ.get(TOKEN_VAR)
    return bool(given and given not in _own_tokens) or bool(os.environ.get("RAY_AUTH_TOKEN_PATH"))


def _private_token() -> None:
    """A fresh token for the private Ray about to start, in this process's environment: Ray's
    daemons and workers inherit it, and a program holding only Ray's shared token file (such
    as one whose ``ray.init(address="auto")`` found this Ray by scanning processes) is refused.
    """
    token = secrets.token_hex(32)
    _own_tokens.add(token)
    os.environ[TOKEN_VAR] = token
    _reload_token()


def _drop_private_token() -> None:
    if os.environ.get(TOKEN_VAR) in _own_tokens:
        del os.environ[TOKEN_VAR]
        _reload_token()


def _reload_token() -> None:
    from ray._raylet import AuthenticationTokenLoader

    AuthenticationTokenLoader.instance().reset_cache()  # Ray caches the token it read


def _token_mode() -> None:
    """Token authentication for this process and the Ray it starts: RAY_AUTH_MODE=token, and
    Ray's cached config refreshed (an imported Ray read the mode already). Ray's own function
    for it, pinned with Ray (pyproject.toml): the one Ray calls itself, minus the warning."""
    from ray._private.authentication.authentication_token_setup import _enable_token_auth

    _enable_token_auth()
