"""A locally started Ray ends with the process that started it, even a SIGKILLed one.

Ray ties its own daemons (GCS, raylet, dashboard, monitors) to the driver that started them, and
its workers follow the raylet; but the raylet's agents (``ray::DashboardAgent``,
``ray::RuntimeEnvAgent``) notice the raylet's death and then hang on their way out, measured here
for minutes. `start_watcher` starts a small watcher process for them, before Ray starts (so that
it is ready when Ray is); `watch_session` then hands it Ray's session directory. It remembers the
driver's Ray processes and their descendants (looked up every POLL_S while the driver lives) and,
once the driver is gone (the pipe only the driver holds reads end-of-file), ends those still
running: SIGTERM, then SIGKILL after GRACE_S. A process is matched by pid and start time, so a
reused pid is never hit.

Run as ``python -m checkerzero.cluster.reaper PID``; its standard input is the pipe, whose first
line names the session directory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import subprocess
import sys

import psutil

logger = logging.getLogger(__name__)

POLL_S = 1.0  # how often the watcher looks for new Ray processes (workers, agents) while the
# driver lives; one scan of the process table takes a few ms
GRACE_S = 2.0  # after SIGTERM, before SIGKILL: time to flush logs, short of "a few seconds"


def start_watcher() -> subprocess.Popen[bytes] | None:
    """Starts the watcher for the Ray this process is about to start; None if it could not
    start (logged: the run goes on, its Ray's agents may then outlive a killed run)."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", __name__, str(os.getpid())],
            stdin=subprocess.PIPE,  # the write end stays here only (close_fds): EOF = we are gone
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C in the terminal is not for it
        )
    except OSError as e:
        logger.warning("could not start the watcher for Ray's processes: %s", e)
        return None


def watch_session(watcher: subprocess.Popen[bytes], session_dir: str) -> None:
    """Tells `watcher` which Ray session to watch (it starts looking at once)."""
    try:
        assert watcher.stdin is not None
        watcher.stdin.write(session_dir.encode() + b"\n")
        watcher.stdin.flush()
    except OSError as e:  # it died: the run goes on without it
        logger.warning("could not reach the watcher for Ray's processes: %s", e)


def ray_processes(driver: psutil.Process, session_dir: str) -> list[psutil.Process]:
    """The driver's children that belong to Ray session `session_dir` (its command line names
    the session's directory), and all their descendants."""
    found: list[psutil.Process] = []
    for child in driver.children():
        with contextlib.suppress(psutil.Error):
            if any(session_dir in arg for arg in child.cmdline()):
                found.append(child)
                found.extend(child.children(recursive=True))
    return found


def watch(driver_pid: int, pipe: int) -> list[psutil.Process]:
    """Remembers `driver_pid`'s Ray processes (of the session the first line of `pipe` names)
    until `pipe` reads end-of-file; then ends the ones still running and returns them."""
    seen: dict[tuple[int, float], psutil.Process] = {}
    try:
        driver = psutil.Process(driver_pid)
    except psutil.Error:
        return []
    received = b""
    while b"\n" not in received:  # the session directory, once Ray has started
        chunk = os.read(pipe, 4096)
        if not chunk:
            return []  # the driver went before its Ray started
        received += chunk
    session_dir = received.split(b"\n", 1)[0].decode()
    while True:
        with contextlib.suppress(psutil.Error):
            for proc in ray_processes(driver, session_dir):
                seen[(proc.pid, proc.create_time())] = proc
        ready, _, _ = select.select([pipe], [], [], POLL_S)
        if ready and not os.read(pipe, 4096):
            break
    alive = [p for p in seen.values() if p.is_running()]  # is_running compares start times
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, left = psutil.wait_procs(alive, timeout=GRACE_S)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return alive


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m checkerzero.cluster.reaper PID", file=sys.stderr)
        return 2
    watch(int(argv[0]), sys.stdin.fileno())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
