"""The private redis-server when something kills it, or kills its owner (real servers).

1. `watch()` brings a SIGKILLed server back on the same port with the same password, replaying
   its append-only file: a client that retries finds every acknowledged write, and one warning
   line says what happened.
2. A server that cannot be brought back (its binary gone) is reported once to the callback, as
   a one-line error, and `stop()` still frees the directory.
3. SIGKILL of the process that started the server takes the server down with it (Linux).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from checkerzero.store.redis_server import EmbeddedRedis, RedisServerError, find_redis_server
from checkerzero.store.replay import ReplayStore, connect

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 30.0  # longest wait for a restart or an exit on two busy cores
POLL_S = 0.05


@pytest.fixture(autouse=True)
def _needs_redis_server():
    try:
        find_redis_server()
    except RedisServerError as e:  # pragma: no cover - the set-up installs it
        pytest.skip(f"redis-server not available: {e}")


def wait_until(predicate, what: str):
    deadline = time.monotonic() + WAIT_S
    while not (value := predicate()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {WAIT_S} s waiting for {what}")
        time.sleep(POLL_S)
    return value


def test_a_killed_server_is_restarted_from_its_append_only_file(tmp_path, caplog):
    failures: list[RedisServerError] = []
    with EmbeddedRedis(tmp_path / "run") as srv:
        srv.watch(failures.append, interval_s=0.05)
        # The run's own retry schedule (0.5 s, 1 s, ...) rides out the restart.
        client = connect(srv.url, srv.password, retries=6, backoff_s=0.1)
        store = ReplayStore(client, record_bytes=(0, 0), window_positions=1_000)
        ids = [store.add_game(bytes([g]) * 100, 5) for g in range(20)]
        port, old_pid = srv.port, srv.pid
        with caplog.at_level(logging.WARNING, logger="checkerzero.store.redis_server"):
            os.kill(old_pid, signal.SIGKILL)
            wait_until(lambda: srv.pid not in (None, old_pid) and srv.running, "a new server")
            # The same client, no reconnect by hand: every acknowledged game is there.
            assert [store.get(i) for i in ids] == [bytes([g]) * 100 for g in range(20)]
            assert store.stats().games_added == 20
            assert store.add_game(b"after the restart", 3) == 21
            # The new server answers as soon as it is launched, a moment before the watcher
            # counts its restart and logs it: wait for that too.
            wait_until(lambda: srv.restarts == 1, "the watcher to count the restart")
        assert srv.port == port and srv.restarts == 1 and failures == []
        lines = [r.getMessage() for r in caplog.records if "died" in r.getMessage()]
        assert lines == [
            f"the private redis-server (pid {old_pid}) died (killed by SIGKILL); restarted it "
            f"on redis://127.0.0.1:{port}/0 from its append-only file (pid {srv.pid})"
        ]
        client.close()
    assert not srv.running and srv.pid is None


def test_a_server_that_cannot_be_restarted_is_reported_once(tmp_path):
    binary = tmp_path / "redis-server"
    shutil.copy(find_redis_server(), binary)
    failures: list[RedisServerError] = []
    reported = threading.Event()

    def lost(error: RedisServerError) -> None:
        failures.append(error)
        reported.set()

    srv = EmbeddedRedis(tmp_path / "run", binary=binary).start()
    try:
        srv.watch(lost, interval_s=0.05)
        port, pid = srv.port, srv.pid
        binary.unlink()  # the running server keeps its image; a new one cannot start
        os.kill(pid, signal.SIGKILL)
        assert reported.wait(WAIT_S)
        time.sleep(0.3)  # several more watch intervals: still one report
        assert len(failures) == 1
        message = str(failures[0])
        assert "\n" not in message
        assert message.startswith(
            f"the private redis-server on port {port} died (killed by SIGKILL) and could not "
            f"be restarted: redis-server from the binary argument ({binary}) is not an "
            "executable file"
        )
        assert not srv.running
    finally:
        srv.stop()
    # The directory is free again: a server (the real binary) starts on it and has the data.
    with EmbeddedRedis(tmp_path / "run") as again:
        assert again.running


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_owner_takes_its_server_down(tmp_path):
    run_dir = tmp_path / "run"
    script = (
        "import sys, time\n"
        "from checkerzero.store.redis_server import EmbeddedRedis\n"
        "from checkerzero.store.replay import ReplayStore, connect\n"
        "srv = EmbeddedRedis(sys.argv[1]).start()\n"
        "store = ReplayStore(connect(srv.url, srv.password, retries=0, backoff_s=0),"
        " record_bytes=(0, 0), window_positions=100)\n"
        "store.add_game(b'from the killed owner', 5)\n"
        "print(srv.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script, str(run_dir)], stdout=subprocess.PIPE, cwd=ROOT
    )
    try:
        server = psutil.Process(int(owner.stdout.readline()))
    finally:
        owner.kill()
        owner.wait()
    try:
        # SIGTERM from the kernel: Redis shuts down as on SHUTDOWN, flushing its file.
        server.wait(timeout=WAIT_S)  # psutil.TimeoutExpired if it outlives its owner
        assert not server.is_running()
    finally:
        if server.is_running():  # the test failed: do not leave a server behind
            server.kill()
    with EmbeddedRedis(run_dir) as srv:
        c = connect(srv.url, srv.password, retries=0, backoff_s=0)
        assert ReplayStore(c, window_positions=100).get(1) == b"from the killed owner"
        c.close()
