"""The play server with hostile files in its folders and hostile values in its requests.

A FIFO where a run file should be, a sparse file that claims a terabyte, a summary nested past
any parser's depth: each is refused in one line and never holds up the other runs. A learned
evaluation named by a player spec is read the same way. Requests with a 900 KB move, a zero
budget or another script's digits get a short error, and every network the server lists plays.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from typing import Any

import pytest
from play_helpers import REPO, Server, make_folders

from evaluation.players.make import make_player
from play.settings import load_settings

NNEVAL = REPO / "game" / "data" / "nneval-v1.safetensors"
ANSWER_S = 20  # a route that hangs on a file fails here instead of waiting for the test's timeout
STOP_S = 30  # SIGTERM to exit, with a request in progress
LONG_MS = 600_000  # a search of ten minutes: the one SIGTERM must cut short


def call(server: Server, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request with a short timeout (a hang is a failure, not a wait)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=ANSWER_S)
    try:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        raw = r.read()
        kind = r.headers.get("Content-Type", "")
        return r.status, json.loads(raw) if "json" in kind else raw.decode()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("play-files")
    runs, models, _ = make_folders(root)
    fifo_run = runs / "fifo-run"
    fifo_run.mkdir()
    (fifo_run / "summary.json").write_text('{"steps": 3}\n')
    os.mkfifo(fifo_run / "metrics.csv")  # no writer: an open for reading waits forever
    (fifo_run / "eval").mkdir()
    os.mkfifo(fifo_run / "eval" / "ratings.csv")
    nested = runs / "nested-run"
    nested.mkdir()
    (nested / "summary.json").write_text("[" * 100_000 + "]" * 100_000)
    sparse = runs / "sparse-run"
    sparse.mkdir()
    with (sparse / "metrics.csv").open("wb") as f:
        f.truncate(1 << 40)  # a terabyte that takes no disk
    shutil.copy(NNEVAL, models / "nneval-v1.safetensors")  # a safetensors file, not a network
    srv = Server(
        runs,
        models,
        root / "server.log",
        "default_simulations=16",
        "limits.max_simulations=64",
        f"limits.max_ms={LONG_MS}",
    )
    yield srv
    if srv.proc.poll() is None:
        srv.stop()


def test_hostile_run_files_are_refused_and_every_other_run_is_listed(server):
    status, runs = call(server, "GET", "/api/runs")
    assert status == 200, runs
    by_name = {r["name"]: r for r in runs}
    assert set(by_name) == {
        "2026-01-02_00-00-00",
        "2026-01-01_00-00-00",
        "2025-12-31_00-00-00",
        "fifo-run",
        "nested-run",
        "sparse-run",
    }
    assert by_name["fifo-run"]["status"] == "finished"
    assert by_name["fifo-run"]["summary"] == {"steps": 3}
    assert by_name["nested-run"]["summary"] is None  # nested past the parser: not shown
    assert by_name["2025-12-31_00-00-00"]["summary"] == {"steps": 9, "weights_version": 1}
    assert by_name["2026-01-01_00-00-00"]["weights_version"] == 5  # good runs keep their lines


@pytest.mark.parametrize(
    ("path", "says"),
    [
        (
            "/api/runs/fifo-run/metrics",
            "metrics file fifo-run/metrics.csv: a FIFO, not a regular file",
        ),
        (
            "/api/runs/sparse-run/metrics",
            "metrics file sparse-run/metrics.csv: 1099511627776 bytes, over",
        ),
        ("/api/runs/fifo-run", "fifo-run/metrics.csv: a FIFO"),
    ],
)
def test_a_route_that_serves_a_hostile_file_names_it_in_one_line(server, path, says):
    status, body = call(server, "GET", path)
    assert status == 400, body
    assert says in body["detail"] and "\n" not in body["detail"], body
    assert str(server.url) not in body["detail"]


def test_a_learned_evaluation_that_is_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "eval.safetensors"
    os.mkfifo(fifo)
    outcome: dict[str, BaseException] = {}

    def build() -> None:
        try:
            make_player(f"ab+nn:2:{fifo}")
        except BaseException as e:  # what it raised is the outcome
            outcome["error"] = e

    thread = threading.Thread(target=build, daemon=True)  # a hang must not hold up pytest
    thread.start()
    thread.join(ANSWER_S)
    if thread.is_alive():
        with open(fifo, "wb"):  # a writer unblocks the reader, so the thread can end
            pass
        pytest.fail(f"ab+nn:2:{fifo} still reading after {ANSWER_S} s")
    assert isinstance(outcome.get("error"), ValueError), outcome
    assert f"learned evaluation {fifo}: a FIFO, not a regular file" in str(outcome["error"])


def test_a_huge_move_gets_a_short_error(server):
    status, body = call(server, "POST", "/api/move", {"moves": ["11-15", "9" * 900_000]})
    assert status == 400, body
    detail = body["detail"]
    assert detail.startswith("move 2: 900000 characters, not a move") and len(detail) < 200


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"sims": 0, "positions": [{}]}, "sims must be 1..64, got 0"),
        ({"ms": 0, "positions": [{}]}, f"ms must be 1..{LONG_MS}, got 0"),
    ],
)
def test_a_zero_budget_is_refused(server, body, says):
    status, answer = call(server, "POST", "/api/analyse", body)
    assert status == 422 and says in answer["detail"], answer


@pytest.mark.parametrize(
    "player",
    ["minimax:\u0663", "random:\u0663", "ab+nn:t\u0663\u0660\u0660", "net.safetensors:sims=\u0663"],
)
def test_digits_of_other_scripts_are_refused_in_player_specs(server, player):
    status, body = call(server, "POST", "/api/move", {"player": player})
    assert status == 400, body
    with pytest.raises(ValueError):
        make_player(player.replace("net.safetensors", str(NNEVAL)))


def test_every_network_listed_plays(server):
    status, config = call(server, "GET", "/api/config")
    assert status == 200
    listed = config["networks"]
    assert "net.safetensors" in listed and "nneval-v1.safetensors" not in listed, listed
    for network in listed:
        status, body = call(server, "POST", "/api/move", {"player": f"{network}:sims=2"})
        assert status == 200, (network, body)


def test_one_client_cannot_hold_every_search_slot_by_default():
    limits = load_settings()["limits"]
    assert limits["max_searches_per_client"] < limits["max_concurrent_searches"]


def test_sigterm_stops_the_server_with_a_search_in_progress(server):
    """The last test of the module: it stops the module's server."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=STOP_S)
    try:
        body = {"network": "net.safetensors", "ms": LONG_MS, "positions": [{}] * 8}
        conn.request("POST", "/api/analyse", json.dumps(body), {"Content-Type": "application/json"})
        deadline = time.monotonic() + ANSWER_S
        while call(server, "GET", "/api/status")[1]["searches"] == 0:
            assert time.monotonic() < deadline, "the search never started"
            time.sleep(0.05)
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server was still running {STOP_S} s after SIGTERM")
    finally:
        conn.close()
