"""A laptop run's Ray stays private; only a cluster the user started is joined.

1. `cluster_to_join("auto")`: RAY_ADDRESS, else the cluster `ray start` recorded when it
   answers, else None (a private Ray); a stale record is passed over. No Ray needed.
2. A program's private Ray is not joined by a second program asking for "auto" (Ray's own
   "auto" finds it by scanning the process table): each starts its own.
3. A joined cluster that goes away ends the joiner with one line within seconds, not after
   Ray's minute of retries; a private Ray stopped with `stop_ray` leaves no token behind.
4. (slow) Two smoke learners and a two-worker match started in overlapping order on one
   machine: each finishes, each on its own Ray.

Every Ray here runs under its own RAY_TMPDIR (where `ray start` records its cluster), so a
test neither sees nor leaves a record for other programs on the machine; processes are ended by
their session, never with `ray stop` (which ends every Ray on the machine).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from checkerzero.cluster import start
from checkerzero.cluster.start import EXIT_CLUSTER_LOST, cluster_to_join

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120  # a Ray start takes 3-9 s here; 2 shared cores can make it several times
LOST_AFTER_S = 2.0  # the joiner's grace for a silent cluster in test 3


@pytest.fixture
def ray_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private Ray temp dir (short: Ray's socket paths must fit in 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="czr", dir="/tmp"))
    monkeypatch.setenv("RAY_TMPDIR", str(folder))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield folder
    with contextlib.suppress(OSError):
        subprocess.run(["rm", "-rf", str(folder)], timeout=60, check=False)


def _listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_auto_joins_only_what_the_user_named(ray_tmp: Path) -> None:
    assert cluster_to_join("local") is None and cluster_to_join(None) is None
    assert cluster_to_join("10.0.0.5:6380") == "10.0.0.5:6380"  # an address is taken as given
    assert cluster_to_join("auto", environ={}) is None  # nothing started: a private Ray
    assert cluster_to_join("auto", environ={"RAY_ADDRESS": "h:1"}) == "h:1"
    assert cluster_to_join("auto", environ={"RAY_ADDRESS": "local"}) is None
    assert cluster_to_join("auto", environ={"RAY_ADDRESS": "auto"}) is None  # never Ray's scan
    mark = ray_tmp / "ray" / "ray_current_cluster"
    mark.parent.mkdir()
    with _listener() as live:
        address = f"127.0.0.1:{live.getsockname()[1]}"
        mark.write_text(address)  # what `ray start` writes
        assert cluster_to_join("auto", environ={}) == address
    # the cluster it names is gone (ended without `ray stop`): passed over, a private Ray
    assert cluster_to_join("auto", environ={}) is None


def _session_kill(proc: subprocess.Popen) -> None:
    """Ends a process started with start_new_session and everything in its session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(p.pid) == proc.pid:
                p.kill()


HOLDER = """
import sys, ray
from checkerzero.cluster.start import start_ray
started = start_ray({address!r}, num_cpus=1, log_to_driver=False)
print("READY", started, ray._private.worker._global_node.gcs_address, flush=True)
sys.stdin.read()  # until the test closes the pipe
"""


def _holder(address: str, env: dict[str, str]) -> tuple[subprocess.Popen, bool, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(address=address)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("READY"):
            _, started, gcs = line.split()
            return proc, started == "True", gcs
    _session_kill(proc)
    raise AssertionError("no READY line:\n" + "".join(lines[-40:]))


FOREIGN = """
import ray
ray.init(address="auto", log_to_driver=False)
print("RESULT", ray.get(ray.remote(lambda: 6 * 7).remote(), timeout=30), flush=True)
"""


def test_a_private_ray_is_not_joined_by_auto(ray_tmp: Path) -> None:
    import ray

    # A Ray an earlier test of this process started with Ray's shared token would be found by
    # the foreign program's scan below, and joined: this test is about the private ones alone.
    if ray.is_initialized():
        ray.shutdown()
    env = dict(os.environ)
    # an earlier test's private Ray's token (in this process's environment), not a user's
    if env.get(start.TOKEN_VAR) in start._own_tokens:
        del env[start.TOKEN_VAR]
    first = second = None
    try:
        first, started1, gcs1 = _holder("local", env)
        assert started1
        second, started2, gcs2 = _holder("auto", env)
        assert started2, f"the second program joined the first's private Ray at {gcs1}"
        assert gcs2 != gcs1
        # Ray's own "auto" (a program not of this project) finds them by scanning processes,
        # but holds only Ray's shared token file: refused
        foreign = subprocess.run(
            [sys.executable, "-c", FOREIGN],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=START_TIMEOUT_S,
        )
        assert "RESULT" not in foreign.stdout, foreign.stdout + foreign.stderr[-2000:]
        assert "InvalidAuthToken" in foreign.stdout + foreign.stderr, foreign.stderr[-2000:]
    finally:
        for proc in (second, first):
            if proc is not None:
                _session_kill(proc)


JOINER = """
import logging, time, ray
from checkerzero.cluster.start import start_ray
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
start_ray({address!r}, log_to_driver=False, lost_after_s={lost})
print("JOINED", flush=True)
time.sleep(600)
"""


STOPPER = """
import os, ray
from checkerzero.cluster.start import TOKEN_VAR, start_ray, stop_ray
assert start_ray("local", num_cpus=1, log_to_driver=False)
had = bool(os.environ.get(TOKEN_VAR))
stop_ray()
print("RESULT", had, TOKEN_VAR in os.environ, ray.is_initialized(), flush=True)
"""


def test_stopping_a_private_ray_forgets_its_token(ray_tmp: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    out = subprocess.run(
        [sys.executable, "-c", STOPPER],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        start_new_session=True,
    )
    # it had a token of its own while it ran, none after, and no Ray
    assert "RESULT True False False" in out.stdout, out.stdout + out.stderr[-3000:]


def test_a_cluster_that_goes_away_ends_the_joiner_with_one_line(ray_tmp: Path) -> None:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    address = cluster.address  # None once it is shut down
    proc = None
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                JOINER.format(address=address, lost=LOST_AFTER_S),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            start_new_session=True,
        )
        for line in proc.stdout:
            if line.startswith("JOINED"):
                break
        else:
            raise AssertionError(f"the joiner ended first (rc {proc.wait()})")
        cluster.shutdown()
        gone = time.monotonic()
        out, _ = proc.communicate(timeout=60)
        took = time.monotonic() - gone
        assert proc.returncode == EXIT_CLUSTER_LOST, out[-3000:]
        lost = [line for line in out.splitlines() if "went away" in line]
        assert len(lost) == 1 and address in lost[0], out[-3000:]
        assert took < 45, f"{took:.0f} s after the cluster ended"  # Ray alone: 60 s and more
    finally:
        if proc is not None:
            _session_kill(proc)
        with contextlib.suppress(Exception):
            cluster.shutdown()


SMOKE = (
    "preset=smoke",
    "cluster.num_cpus=1",
    "selfplay.actors=1",
    "selfplay.games_in_parallel=2",
    "mcts.simulations=8",
)


@pytest.mark.slow
def test_two_learners_and_a_match_each_on_its_own_ray(ray_tmp: Path, tmp_path: Path) -> None:
    """The default `cluster.address=auto` everywhere: nothing joins another program's Ray."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    commands = [
        [sys.executable, "-m", "learner", *SMOKE, f"run_dir={tmp_path / 'a'}"],
        [
            sys.executable,
            "-m",
            "evaluation.match",
            "minimax:1",
            "random",
            "--games",
            "4",
            "--workers",
            "2",
        ],
        [sys.executable, "-m", "learner", *SMOKE, f"run_dir={tmp_path / 'b'}"],
    ]
    procs = []
    try:
        for command in commands:
            procs.append(
                subprocess.Popen(
                    command,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    cwd=ROOT,
                    env=env,
                    start_new_session=True,
                )
            )
            time.sleep(8)  # overlapping: each starts while the one before is starting or running
        outputs = [p.communicate(timeout=600)[0] for p in procs]
    finally:
        for proc in procs:
            _session_kill(proc)
    for command, proc, out in zip(commands, procs, outputs, strict=True):
        assert proc.returncode == 0, f"{command[2]}: rc {proc.returncode}\n{out[-3000:]}"
        assert "joined the Ray cluster" not in out, out[-3000:]
    for out in outputs[::2]:
        assert re.search(r"started a local Ray", out), out[-3000:]


def test_no_test_ends_processes_by_name() -> None:
    """Tests end the processes they started, by pid (or by their own session): a kill by name
    (`pkill -f`, `killall`) or `ray stop` would hit other programs on the machine too."""
    by_name = ('"p' + 'kill"', '"kill' + 'all"', '"ray", "st' + 'op"', "'p" + "kill'")
    found = [
        f"{path.name}: {text}"
        for path in sorted((ROOT / "tests").glob("*.py"))
        for text in by_name
        if text in path.read_text(encoding="utf-8")
    ]
    assert found == []
