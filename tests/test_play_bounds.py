"""The play server against floods and slow clients, over real sockets.

One client flooding cheap work (random moves, one-visit analyses of 256 positions) gets 429s
and 503s while another user's requests are answered; connections that send half their
headers or half their body are closed at their deadline; a connection beyond the cap is
refused at once; a body over the cap is refused as it streams; and the memory a burst of large
bodies took comes back once they have gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from play_helpers import Server, make_folders

from play.clients import client_of, socket_owner

DEADLINE_S = 1.0  # header and body deadlines of the servers here
CLOSE_WAIT_S = 60  # how long a test waits for the server to close what it must (a busy machine)
NOBODY = 65534  # the user a second local client runs as
BURST = 300  # connections of the memory burst, each with a 900 KB half-sent body
BURST_BODY = 900_000
RSS_TOLERANCE_MB = 80  # what a burst may leave behind: the base case kept 270 MB


def send_raw(port: int, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=CLOSE_WAIT_S)
    if data:
        sock.sendall(data)
    return sock


def request_bytes(port: int, path: str, body: dict) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + data


def status_of(sock: socket.socket) -> int:
    """The status of the answer on ``sock`` (0 when it closed without one)."""
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    sock.close()
    return int(data.split()[1]) if data.startswith(b"HTTP/1.1 ") else 0


def wait_closed(socks: list[socket.socket], within_s: float) -> list[socket.socket]:
    """The sockets of ``socks`` the server has not closed within ``within_s`` seconds."""
    left = list(socks)
    deadline = time.monotonic() + within_s
    while left and time.monotonic() < deadline:
        ready, _, _ = select.select(left, [], [], 0.5)
        for sock in ready:
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                left.remove(sock)
    return left


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("play-bounds")
    runs, models, _ = make_folders(root)
    return root, runs, models


@pytest.fixture(scope="module")
def server(folders):
    root, runs, models = folders
    srv = Server(
        runs,
        models,
        root / "server.log",
        "limits.max_requests_per_client=4",
        "limits.max_concurrent_quick=1",
        "limits.max_waiting_per_client=1",
        "limits.queue_wait_s=60",
        "limits.max_connections=400",
        f"limits.header_timeout_s={DEADLINE_S}",
        f"limits.body_timeout_s={DEADLINE_S}",
    )
    yield srv
    srv.stop()


# --- who a client is ---------------------------------------------------------------------------


def test_a_local_client_is_the_user_that_owns_its_socket():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            peer = client.getsockname()
            assert socket_owner(peer, ("127.0.0.1", port)) == os.getuid()
            scope = {"client": peer, "server": ("127.0.0.1", port)}
            assert client_of(scope) == f"uid {os.getuid()}@127.0.0.1"
    remote = {"client": ("192.0.2.7", 40000), "server": ("0.0.0.0", 8000)}
    assert client_of(remote) == "192.0.2.7"  # a remote client is its address


def _python_outside_root() -> str | None:
    """A Python another user can run (the venv's may live in root's home)."""
    for path in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(path, os.X_OK):
            return path
    return None


VICTIM = """
import json, sys, time, urllib.request
port = int(sys.argv[1])
out = []
for path, body in (("/api/position", {"moves": ["11-15"]}), ("/api/move", {"player": "random:1"})):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            out.append(r.status)
    except urllib.error.HTTPError as e:
        out.append(e.code)
print(json.dumps(out))
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or _python_outside_root() is None,
    reason="a second local user needs root and setpriv",
)
def test_a_flood_of_cheap_work_is_bounded_and_another_user_is_served(server):
    analysis = {"network": "net.safetensors", "sims": 1, "positions": [{"moves": ["11-15"]}] * 8}
    floods = [
        send_raw(server.port, request_bytes(server.port, "/api/analyse", analysis))
        for _ in range(30)
    ]
    floods += [
        send_raw(server.port, request_bytes(server.port, "/api/move", {"player": "random"}))
        for _ in range(30)
    ]
    victim = subprocess.run(
        [
            *("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"),
            *(str(_python_outside_root()), "-I", "-c", VICTIM, str(server.port)),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd="/",
    )
    assert victim.returncode == 0, victim.stderr
    assert json.loads(victim.stdout) == [200, 200]  # another user: its own limits, served
    statuses = [status_of(sock) for sock in floods]
    assert set(statuses) <= {200, 429, 503}, statuses
    refused = sum(s in (429, 503) for s in statuses)
    assert refused >= 40, statuses  # at most 4 inside at once, one running and one waiting
    status = server.get("/api/status")
    assert status["quick"] == 0 and status["quick_queued"] == 0


# --- slow clients ------------------------------------------------------------------------------


def test_half_sent_headers_and_silent_connections_are_closed_at_their_deadline(server):
    half = f"POST /api/position HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Ty"
    socks = [send_raw(server.port, half.encode()) for _ in range(50)]
    socks += [send_raw(server.port, b"") for _ in range(50)]  # connected, nothing sent
    left = wait_closed(socks, CLOSE_WAIT_S)
    for sock in socks:
        sock.close()
    assert not left, f"{len(left)} of {len(socks)} slow connections still open"
    assert server.post("/api/position", {})["turn"] == "B"


def test_half_sent_bodies_are_closed_at_their_deadline(server):
    head = (
        f"POST /api/position HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        'Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"moves": ['
    )
    socks = [send_raw(server.port, head.encode()) for _ in range(50)]
    left = wait_closed(socks, CLOSE_WAIT_S)
    for sock in socks:
        sock.close()
    assert not left, f"{len(left)} of {len(socks)} half-sent bodies still open"


def test_a_kept_alive_connection_gets_the_header_deadline_for_its_next_request(server):
    sock = send_raw(server.port, b"")
    data = json.dumps({}).encode()
    sock.sendall(
        f"POST /api/position HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(data)}\r\n"
        "Content-Type: application/json\r\n\r\n".encode()
        + data
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200")
    sock.sendall(b"GET /api/status HTTP/1.1\r\nHo")  # the next request, half sent
    assert not wait_closed([sock], CLOSE_WAIT_S)
    sock.close()


def test_a_streamed_body_over_the_cap_is_refused_before_it_ends(server):
    limit = server.get("/api/config")["limits"]["max_request_bytes"]
    sock = send_raw(
        server.port,
        b"POST /api/position HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n",
    )
    chunk = b"x" * 65536
    sent = 0
    try:
        while sent <= limit + len(chunk):  # a little past the cap, never the end of the body
            sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            sent += len(chunk)
    except OSError:
        pass  # the server refused and closed while the body was still coming
    assert status_of(sock) == 413


def test_connections_beyond_the_cap_are_refused_at_once(folders, tmp_path):
    _, runs, models = folders
    srv = Server(
        runs,
        models,
        tmp_path / "server.log",
        "limits.max_connections=20",
        "limits.header_timeout_s=3",
    )
    try:
        held = [send_raw(srv.port, b"") for _ in range(20)]
        time.sleep(0.5)
        extra = send_raw(srv.port, b"")
        answer = extra.recv(4096)
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert b"limits.max_connections" in answer
        assert not wait_closed([extra], CLOSE_WAIT_S)
        for sock in held:
            sock.close()
        deadline = time.monotonic() + CLOSE_WAIT_S
        while True:  # the closed ones are counted out: the server answers again
            status, _ = srv.request("GET", "/api/status")
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status == 200
    finally:
        srv.stop()


def test_memory_taken_by_a_burst_of_bodies_comes_back(server):
    pid = server.proc.pid
    server.post("/api/position", {})
    before = rss_mb(pid)
    head = (
        b"POST /api/pdn/parse HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000000\r\n\r\n"
    )
    body = b'{"pdn": "' + b"1" * (BURST_BODY - 9)
    socks = []
    for _ in range(BURST):
        sock = send_raw(server.port, b"")
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.send(head + body)  # as much as the socket takes; the rest never comes
        socks.append(sock)
    for sock in socks:
        sock.setblocking(True)
    assert not wait_closed(socks, CLOSE_WAIT_S), "half-sent bodies still open"
    for sock in socks:
        sock.close()
    time.sleep(1.0)
    server.post("/api/position", {})  # the server answers, and has let the burst go
    after = rss_mb(pid)
    assert after - before < RSS_TOLERANCE_MB, (before, after)
