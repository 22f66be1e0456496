"""The play server under load: searches are cancelled when their client leaves, waiting takes
no thread (the cheap routes answer while every slot is busy and requests queue), free slots go
round robin between clients, and a search stops at the request's wall-time cap."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
from play_helpers import SHIPPED, Server, make_folders

from checkerzero.network.inference import load_for_play
from evaluation.players.defaults import default_mcts_settings, play_settings
from game import Position
from play.analysis import Budget, Cancelled, Stop, analyse
from play.slots import Busy, Slots

LONG = 20000  # visits per position: 8 positions of this take minutes on a laptop core
WAIT_S = 120  # how long a test waits for the server to reach a state (a hang fails, not a slow run)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("play-load")
    runs, models, _ = make_folders(root)
    srv = Server(
        runs,
        models,
        root / "server.log",
        f"limits.max_simulations={LONG}",
        "limits.max_request_simulations=1000000",
        "limits.max_batch_positions=8",
        "limits.max_concurrent_searches=1",
        "limits.max_searches_per_client=1",
        "limits.queue_wait_s=600",
        "limits.max_request_s=3600",
    )
    yield srv
    srv.stop()


def open_request(server: Server, path: str, body: dict) -> socket.socket:
    """A request sent on a socket of its own, its answer not read: closing the socket is the
    client going away."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


def long_analysis(server: Server) -> socket.socket:
    return open_request(
        server,
        "/api/analyse",
        {"network": "net.safetensors", "sims": LONG, "positions": [{"id": k} for k in range(8)]},
    )


def wait_for(server: Server, **want: int) -> dict:
    deadline = time.monotonic() + WAIT_S
    while True:
        status = server.get("/api/status")
        if all(status[k] == v for k, v in want.items()):
            return status
        assert time.monotonic() < deadline, (want, status)
        time.sleep(0.05)


def test_a_search_whose_client_leaves_is_cancelled(server):
    before = server.get("/api/status")
    sock = long_analysis(server)
    wait_for(server, searches=1)
    sock.close()
    status = wait_for(server, searches=0)
    assert status["cancelled"] == before["cancelled"] + 1
    assert status["served"] == before["served"] + 1


def test_cheap_routes_and_players_answer_while_searches_run_and_queue(server):
    before = server.get("/api/status")
    socks = [long_analysis(server)]
    wait_for(server, searches=1)
    socks += [long_analysis(server) for _ in range(3)]
    try:
        status = wait_for(server, searches=1, queued=3)
        assert status["slots"] == 1
        config = server.get("/api/config")
        assert config["limits"]["max_concurrent_searches"] == 1
        assert config["limits"]["max_request_s"] == 3600
        moved = server.post("/api/move", {"player": "random:1"})
        assert moved["move"] in {m["move"] for m in server.post("/api/position", {})["legal"]}
        policy = server.post("/api/move", {"player": "net.safetensors:sims=1"})
        assert policy["visits"] == 1
        assert server.post("/api/pdn/write", {"moves": ["11-15"]}).startswith("[")
        assert server.get("/api/status")["searches"] == 1
    finally:
        for sock in socks[1:]:  # the waiting ones first: no slot may go to one of them
            sock.close()
        wait_for(server, queued=0)
        socks[0].close()
    status = wait_for(server, searches=0, queued=0)
    # The running search and the three waiting requests: all given up, none searched on.
    assert status["cancelled"] == before["cancelled"] + 4
    assert status["served"] == before["served"] + 1


# --- in process: the slot queue and the wall-time cap ----------------------------------------


def test_free_slots_go_round_robin_between_clients():
    async def scenario() -> list[str]:
        slots = Slots(total=2, per_client=2, max_waiting=3, wait_s=60)
        order: list[str] = []

        async def ask(client: str) -> None:
            assert await slots.acquire(client)
            order.append(client)

        assert await slots.acquire("a") and await slots.acquire("a")  # a holds both slots
        waiting = [asyncio.create_task(ask("a")) for _ in range(3)]
        await asyncio.sleep(0)
        with pytest.raises(Busy, match="3 requests of this client already wait"):
            await slots.acquire("a")
        waiting.append(asyncio.create_task(ask("b")))  # b comes last
        await asyncio.sleep(0)
        assert (slots.busy, slots.queued) == (2, 4)
        for _ in range(4):
            slots.release(order[-1] if order else "a")
            await asyncio.sleep(0)
        await asyncio.gather(*waiting)
        return order

    # b is served first: it runs nothing, while a runs a search.
    assert asyncio.run(scenario()) == ["b", "a", "a", "a"]


def test_a_request_that_waits_too_long_or_whose_client_leaves_gets_no_slot():
    async def scenario() -> None:
        slots = Slots(total=1, per_client=1, max_waiting=5, wait_s=0)
        assert await slots.acquire("a")
        with pytest.raises(Busy, match=r"all 1 search slots stayed busy for 0 s"):
            await slots.acquire("b")
        slots.wait_s = 60
        gone = asyncio.Event()
        task = asyncio.create_task(slots.acquire("b", gone))
        await asyncio.sleep(0)
        assert slots.queued == 1
        gone.set()
        assert await task is False
        assert (slots.busy, slots.queued) == (1, 0)
        slots.release("a")
        assert (slots.busy, slots.queued) == (0, 0)

    asyncio.run(scenario())


class Ticking:
    """The shipped network's evaluator; each batch moves a simulated clock one second on."""

    def __init__(self) -> None:
        self.inner, _ = load_for_play(SHIPPED, 8, device="cpu")
        self.now = 0.0
        self.batches = 0

    def clock(self) -> float:
        return self.now

    def evaluate(self, planes, masks):
        self.now += 1.0
        self.batches += 1
        return self.inner.evaluate(planes, masks)


def test_a_search_stops_at_its_time_cap_and_answers_what_it_searched():
    ev = Ticking()
    stop = Stop(max_s=3, clock=ev.clock)
    settings = play_settings(default_mcts_settings(), leaves_per_game=8)
    (result,) = analyse([Position()], ev, Budget(simulations=LONG), settings, stop=stop)
    assert stop.reason == "time" and ev.batches == 3
    assert 0 < result.visits < LONG and result.move in result.legal
    assert result.top[0].move == result.move


def test_a_cancelled_search_stops_after_its_batch():
    ev = Ticking()
    stop = Stop(clock=ev.clock)
    original = ev.evaluate

    def cancel_at_second(planes, masks):
        if ev.batches == 1:
            stop.cancel()  # as the server's watcher does from the event loop
        return original(planes, masks)

    ev.evaluate = cancel_at_second
    settings = play_settings(default_mcts_settings(), leaves_per_game=8)
    with pytest.raises(Cancelled, match="its client has gone"):
        analyse([Position()] * 2, ev, Budget(simulations=LONG), settings, stop=stop)
    assert ev.batches == 2
    stop = Stop(clock=ev.clock)  # a time budget stops the same way
    ev.batches = 0
    with pytest.raises(Cancelled):
        analyse([Position()], ev, Budget(ms=10**7, chunk=8), settings, stop=stop)
    assert ev.batches == 2
