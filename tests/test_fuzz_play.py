"""Fuzzing the play surfaces: API bodies, PDN write fields, engine lines, play settings, run
folders of hostile files and slow clients.

Every case is random (seeded, so a failure replays): valid requests with fields replaced,
dropped or added, values of every JSON kind and absurd size, move and FEN look-alikes. The
server is called in process (the ASGI app through httpx's ASGI transport, which raises any
exception a route lets out), the engine through its line handler, the settings through the
loader. The only outcomes allowed are an answer or a clean error: a JSON error object with a
4xx status (never a 500), an engine error line, a one-line ValueError for a setting.

Run folders are filled at random with the files a hostile user can leave (FIFOs, sparse
terabytes, JSON nested 10^5 deep, devices, links out, folders where files belong, garbage) and
every run route is called on them: each answers or refuses within seconds. Slow clients are
raw sockets given random prefixes of valid requests (cut headers, cut bodies, nothing at all)
against a real server with one-second read deadlines: every connection is answered or closed,
and the server then answers as before, its memory back near where it was.

The default lane runs 10^4 cases in all (under a minute here); ``-m slow`` runs 10^5.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import select
import shutil
import socket
import string
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from play_helpers import SHIPPED, Server, make_folders

from checkerzero.store.live import encode, make_live
from game.pdn import read_pdn
from play.__main__ import parse_overrides
from play.app import create_app
from play.engine import read_lines, serve
from play.paths import Roots
from play.players import Players
from play.settings import SCHEMA, load_settings

# Default lane: 10^4 cases in all; the slow lane ten times as many of each kind.
CASES = {"api": 4000, "pdn_write": 2000, "engine": 2000, "settings": 2000}
RUN_CASES, HOSTILE_RUNS = 300, 12  # run-route calls, and the run folders they read
SLOW_CLIENTS = 200  # raw sockets of the slow-client case (the slow lane: 10 waves of them)
SLOW_FACTOR = 10
NETWORK = SHIPPED.name
# Small bounds, so that every request the fuzzer makes valid costs milliseconds.
LIMITS = {
    "max_simulations": 4,
    "max_ms": 5,
    "max_minimax_depth": 2,
    "max_batch_positions": 4,
    "max_request_simulations": 16,
    "max_moves": 40,
    "max_request_bytes": 20000,
    "max_pdn_games": 5,
    "max_pdn_chars": 3000,
    "max_pdn_moves": 200,
    "max_request_s": 5.0,
    "queue_wait_s": 30.0,
}
KEYS = ["fen", "moves", "player", "id", "sims", "ms", "network", "positions", "pdn", "result"]
KEYS += ["tags", "Event", "", "x" * 200, "a b", 'E"]', "\n", "FEN", "Result"]
ERRORS = {400, 403, 404, 413, 422}

MOVES = ["11-15", "23-19", "9-14", "22-17", "15x24", "9x18x27", "1-5", "32-28", "12-16"]
FENS = ["B:W21,22,23:B1,2,3", "W:WK14:BK18", "B:W14,22:B10,9", "W:B1:W", "B:W:B", "?"]
PLAYERS = [
    "random",
    "random:7",
    "minimax:1",
    "minimax:2",
    "minimax:3",
    "minimax:t5",
    "uniform-mcts:sims=2",
    f"{NETWORK}:sims=1",
    f"{NETWORK}:sims=4",
    f"{NETWORK}:ms=3",
    f"{NETWORK}:t2",
    f"{NETWORK}:sims=2:cpuct=2.5",
    f"{NETWORK}:sims=2,cpuct=1e9",
    "../x.safetensors",
    "/etc/passwd.safetensors",
    "missing.safetensors",
    "a.pt",
    f"{NETWORK}:sims=999999999999999999999",
    f"{NETWORK}:device=cuda",
]


def odd_value(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value of any kind, often absurd: huge, negative, empty, nested, not text."""
    kind = rng.randrange(14 if depth < 3 else 10)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, 1, -1, 2, 7, 2**31, -(2**63), 2**64, 10**30])
    if kind == 3:
        return rng.choice([0.5, -0.0, 1e308, -1e-308, 3.0, 1.5])
    if kind == 4:
        return rng.choice(MOVES + FENS + PLAYERS)
    if kind == 5:
        return "".join(rng.choice("0123456789-x:,KWB ") for _ in range(rng.randrange(12)))
    if kind == 6:
        return "".join(rng.choice(string.printable) for _ in range(rng.randrange(30)))
    if kind == 7:
        return rng.choice(["", " ", "\x00", "\n", "\u2028", "é", "\ud7ff", "[", '"]', "1-0\n*"])
    if kind == 8:
        return "x" * rng.choice([100, 501, 5000])
    if kind == 9:
        return rng.choice(["*", "1-0", "0-1", "1/2-1/2", "2-0", "1-0 1. 22-18", '1-0"]'])
    if kind == 10:
        return [odd_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    if kind == 11:
        return {odd_key(rng): odd_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    if kind == 12:
        return [rng.choice(MOVES) for _ in range(rng.randrange(60))]
    return rng.choice(PLAYERS)


def odd_key(rng: random.Random) -> str:
    return rng.choice(KEYS)


def valid_moves(rng: random.Random) -> list[str]:
    line = [["11-15", "23-19", "8-11", "22-17"], ["9-14", "22-18", "5-9"], ["11-16"], []]
    return list(rng.choice(line))


def valid_body(route: str, rng: random.Random) -> dict[str, Any]:
    if route == "/api/position":
        return {"moves": valid_moves(rng)}
    if route == "/api/move":
        return {"moves": valid_moves(rng), "player": rng.choice(PLAYERS[:13])}
    if route == "/api/analyse":
        body: dict[str, Any] = {"network": rng.choice([NETWORK, "uniform-mcts"])}
        body["sims"] = rng.choice([1, 2, 4])
        body["positions"] = [
            {"id": k, "moves": valid_moves(rng)} for k in range(rng.randrange(1, 5))
        ]
        return body
    if route == "/api/pdn/parse":
        return {"pdn": rng.choice(['[Event "e"]\n1. 11-15 23-19 *\n', "1. 9-14 22-18 1-0", ""])}
    return {"moves": valid_moves(rng), "result": "*", "tags": {"Event": "e"}}


def mutate(value: Any, rng: random.Random) -> Any:
    """``value`` with one random change somewhere inside it."""
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(list(value))
        choice = rng.randrange(4)
        if choice == 0:
            del value[key]
        elif choice == 1:
            value[key] = odd_value(rng)
        elif choice == 2:
            value[odd_key(rng)] = odd_value(rng)
        else:
            value[key] = mutate(value[key], rng)
        return value
    if isinstance(value, list) and value and rng.random() < 0.7:
        k = rng.randrange(len(value))
        value[k] = mutate(value[k], rng) if rng.random() < 0.5 else odd_value(rng)
        return value
    return odd_value(rng)


@pytest.fixture(scope="module")
def app(tmp_path_factory) -> Any:
    runs = tmp_path_factory.mktemp("fuzz-runs")
    settings = load_settings(
        {
            "allowed_hosts": ["testserver"],
            "default_player": f"{NETWORK}:sims=2",
            "default_opponent": f"{NETWORK}:sims=2",
            "default_simulations": 2,
            "torch_threads": 1,
            "limits": LIMITS,
        }
    )
    return create_app(settings, Roots(runs, SHIPPED.parent))


def calling(app: Any, fuzz: Any, cases: int, seed: int) -> None:
    """``fuzz(client, cases, seed)`` with an httpx client that calls ``app`` in this process
    (any exception a route lets out is raised here, not turned into a 500)."""

    async def main() -> None:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            await fuzz(c, cases, seed)

    asyncio.run(main())


def check_answer(r: Any, case: Any) -> None:
    assert r.status_code == 200 or r.status_code in ERRORS, (r.status_code, case, r.text[:300])
    if r.status_code != 200:
        body = r.json()
        assert isinstance(body, dict) and "detail" in body, (case, body)
        if isinstance(body["detail"], str):
            assert "Traceback" not in body["detail"] and "\n" not in body["detail"], body


ROUTES = ["/api/position", "/api/move", "/api/analyse", "/api/pdn/parse", "/api/pdn/write"]


async def fuzz_api(client: httpx.AsyncClient, cases: int, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(cases):
        route = rng.choice(ROUTES)
        body: Any = valid_body(route, rng)
        for _ in range(rng.randrange(1, 4)):
            body = mutate(body, rng)
        if rng.random() < 0.05:  # not JSON at all, or JSON of another kind
            raw = rng.choice([b"{", b"", b"\xff\xfe", b"[]", b"null", b'"x"', b"1e999", b"NaN"])
            r = await client.post(route, content=raw, headers={"Content-Type": "application/json"})
        else:
            r = await client.post(route, json=body)
        check_answer(r, (route, body))


async def fuzz_pdn_write(client: httpx.AsyncClient, cases: int, seed: int) -> None:
    """Tag names and values, results and moves: refused (400/422), or written so that the
    text reads back as the same moves, result and tags."""
    rng = random.Random(seed)
    for _ in range(cases):
        tags = {}
        for _ in range(rng.randrange(4)):
            name = rng.choice(["Event", "Site", "Black", "White", "X_1", odd_value(rng)])
            tags[name if isinstance(name, str) else str(name)] = (
                "".join(rng.choice(string.printable + '"\\]') for _ in range(rng.randrange(20)))
                if rng.random() < 0.7
                else odd_value(rng)
            )
        body = {
            "moves": valid_moves(rng) if rng.random() < 0.8 else odd_value(rng),
            "result": rng.choice(["*", "1-0", "0-1", "1/2-1/2"]) if rng.random() < 0.5 else None,
            "tags": tags,
        }
        if body["result"] is None:
            body["result"] = odd_value(rng)
        r = await client.post("/api/pdn/write", json=body)
        check_answer(r, body)
        if r.status_code == 200:
            (game,) = read_pdn(r.text)
            assert game.moves == body["moves"] and game.result == body["result"], body
            for name, value in body["tags"].items():
                assert game.tags.get(name) == value, (name, value, r.text)


def fuzz_engine(engines: Players, cases: int, seed: int) -> None:
    rng = random.Random(seed)
    queries = []
    for k in range(cases):
        query: Any = {"id": k, "moves": valid_moves(rng), "sims": rng.choice([1, 2, 4])}
        if rng.random() < 0.3:
            query = {"id": k, "action": "move", "player": rng.choice(PLAYERS)}
        for _ in range(rng.randrange(1, 4)):
            query = mutate(query, rng)
        line = json.dumps(query)
        if rng.random() < 0.1:  # damaged text
            cut = rng.randrange(len(line) + 1)
            junk = rng.choice(["", "}", "\x00", "é", "[" * 50, "9" * 5000])
            line = line[:cut] + junk + line[cut:]
        queries.append(line.replace("\n", " ").encode("utf-8", "surrogatepass"))
    stream = io.BytesIO(b"\n".join(queries) + b"\n")
    lines = read_lines(stream, int(engines.limits["max_request_bytes"]))
    answers = list(serve(engines, lines, f"{NETWORK}:sims=2"))
    assert len(answers) == cases
    for line in answers:
        assert "\n" not in line
        out = json.loads(line)
        assert isinstance(out, dict) and ("error" in out or "move" in out or "legal" in out), out
        if "error" in out:
            assert not out["error"].startswith("internal error"), out


def fuzz_settings(cases: int, seed: int) -> None:
    """Absurd values for every key: refused with a one-line ValueError naming the key, or
    accepted; accepted limits build a server whose cheap routes answer."""
    rng = random.Random(seed)
    keys = sorted(SCHEMA)
    built = 0
    for _ in range(cases):
        overrides: dict[str, Any] = {}
        for key in rng.sample(keys, rng.randrange(1, 4)):
            *parents, leaf = key.split(".")
            node = overrides
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = odd_value(rng)
        if rng.random() < 0.1:
            text = rng.choice(keys) + "=" + str(odd_value(rng))
            try:
                overrides = parse_overrides([text])
            except ValueError as e:
                assert "\n" not in str(e)
                continue
        try:
            settings = load_settings(overrides)
        except ValueError as e:
            assert "\n" not in str(e) and "play" in str(e), (overrides, str(e))
            continue
        if built < 5:  # building an app is slow: a few of the accepted ones are served
            built += 1
            settings["allowed_hosts"] = ["testserver"]
            with TestClient(create_app(settings, Roots("runs", SHIPPED.parent))) as c:
                assert c.get("/api/status").status_code == 200
                assert c.get("/api/config").json()["limits"] == settings["limits"]


# --- hostile run folders --------------------------------------------------------------------

RUN_FILES = [
    "metrics.csv",
    "summary.json",
    "eval/ratings.csv",
    "games/selfplay.pdn",
    "games/live.json",
    "checkpoints/latest.safetensors",
]
FILE_KINDS = [
    "good",
    "fifo",
    "sparse",
    "nested",
    "device",
    "link_out",
    "folder",
    "garbage",
    "empty",
]


def hostile_file(path: Path, kind: str, rng: random.Random) -> None:
    """``path`` made a file of ``kind``: one a run could hold, or one a hostile user left."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "good":
        good = {
            "metrics.csv": "time_s,step,key,value\n1.0,5,learner/weights_version,1\n",
            "summary.json": '{"steps": 5}',
            "ratings.csv": "player,elo,lower,upper,games,points,anchored\nv1,5,1,9,2,1,False\n",
            "selfplay.pdn": "1. 11-15 23-19 *\n",
        }
        if path.name == "live.json":
            live = make_live(
                actor=3,
                version=1,
                opening="ACF 1",
                fen="B:W21,22:B1,2",
                moves=["1-5"],
                opening_plies=0,
                updated=time.time(),
            )
            path.write_bytes(encode(live))
        elif path.name == "latest.safetensors":
            shutil.copy(SHIPPED, path)
        else:
            path.write_text(good[path.name])
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "sparse":
        with path.open("wb") as f:
            f.truncate(1 << 40)
    elif kind == "nested":
        depth = rng.choice([1000, 100_000])
        path.write_text("[" * depth + "]" * depth if rng.random() < 0.5 else '{"a":' * depth)
    elif kind == "device":
        os.symlink("/dev/zero", path)
    elif kind == "link_out":
        os.symlink("/etc/hostname", path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "garbage":
        path.write_bytes(rng.randbytes(rng.randrange(1, 5000)))
    else:
        path.write_bytes(b"")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Any, list[str]]:
    """An app over a runs folder of HOSTILE_RUNS runs whose files are of random kinds."""
    runs = tmp_path_factory.mktemp("hostile-runs")
    rng = random.Random(5)
    names = []
    for k in range(HOSTILE_RUNS):
        name = f"run-{k}"
        (runs / name).mkdir()
        for rel in RUN_FILES:
            kind = rng.choice([*FILE_KINDS, "absent"])
            if kind != "absent":
                hostile_file(runs / name / rel, kind, rng)
        names.append(name)
    settings = load_settings(
        {
            "allowed_hosts": ["testserver"],
            "default_player": f"{NETWORK}:sims=1",
            "default_opponent": "random",
            "default_simulations": 1,
            "limits": LIMITS,
            "runs": {"live_within_s": 10**9, "max_file_bytes": 10**6},
        }
    )
    return create_app(settings, Roots(runs, SHIPPED.parent)), names


ROUTE_S = 20  # a run route that takes longer is hung on a file


async def fuzz_run_files(client: httpx.AsyncClient, cases: int, seed: int, names: list[str]):
    rng = random.Random(seed)
    for _ in range(cases):
        run = rng.choice([*names, "../x", "nope", "run-0/..", "%2e%2e"])
        path = rng.choice(
            [
                "/api/runs",
                "/api/config",
                f"/api/runs/{run}",
                f"/api/runs/{run}/metrics",
                f"/api/runs/{run}/live",
                f"/api/runs/{run}/games/games/selfplay.pdn",
                f"/api/runs/{run}/games/games/selfplay.pdn?format=json",
                "move",
            ]
        )
        if path == "move":
            body = {"player": f"{run}/checkpoints/latest.safetensors:sims=1"}
            call = client.post("/api/move", json=body)
        else:
            call = client.get(path)
        r = await asyncio.wait_for(call, ROUTE_S)
        check_answer(r, path)


def test_hostile_run_files(hostile):
    app, names = hostile

    async def fuzz(client: httpx.AsyncClient, cases: int, seed: int) -> None:
        await fuzz_run_files(client, cases, seed, names)

    calling(app, fuzz, RUN_CASES, seed=6)


# --- slow clients -----------------------------------------------------------------------------

CLOSE_WAIT_S = 90  # every slow connection must be answered or closed by then (a busy machine)


def slow_request(rng: random.Random, port: int) -> bytes:
    """A random prefix of a valid request, or garbage, or nothing (the client then stalls)."""
    body = json.dumps(valid_body(rng.choice(ROUTES), rng)).encode()
    if rng.random() < 0.2:
        body = b'{"pdn": "' + b"1" * rng.randrange(10_000, 19_000)  # large and never ended
    whole = (
        f"POST {rng.choice(ROUTES)} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body) + rng.randrange(2)}\r\n"
        "\r\n"
    ).encode() + body
    kind = rng.randrange(4)
    if kind == 0:
        return b""
    if kind == 1:
        return rng.randbytes(rng.randrange(1, 200))
    return whole[: rng.randrange(1, len(whole) + 1)]


def rss_mb(pid: int) -> float:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if "VmRSS" in x)
    return int(line.split()[1]) / 1024


def fuzz_slow_clients(server: Server, cases: int, seed: int) -> None:
    rng = random.Random(seed)
    socks = []
    for _ in range(cases):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=CLOSE_WAIT_S)
        data = slow_request(rng, server.port)
        if data:
            sock.sendall(data)
        socks.append(sock)
    left, deadline = list(socks), time.monotonic() + CLOSE_WAIT_S
    while left and time.monotonic() < deadline:
        ready, _, _ = select.select(left, [], [], 0.5)
        for sock in ready:
            try:
                more = sock.recv(65536)
            except OSError:
                more = b""
            if not more:
                left.remove(sock)
    for sock in socks:
        sock.close()
    assert not left, f"{len(left)} of {cases} slow connections neither answered nor closed"
    assert server.post("/api/position", {})["turn"] == "B"


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-slow")
    runs, models, _ = make_folders(root)
    srv = Server(
        runs,
        models,
        root / "server.log",
        "limits.header_timeout_s=1",
        "limits.body_timeout_s=1",
        "limits.max_request_bytes=20000",
        "limits.max_connections=1000",
    )
    yield srv
    srv.stop()


def test_slow_clients(slow_server):
    slow_server.post("/api/position", {})
    before = rss_mb(slow_server.proc.pid)
    fuzz_slow_clients(slow_server, SLOW_CLIENTS, seed=7)
    assert rss_mb(slow_server.proc.pid) - before < 100, "memory kept after slow clients"


@pytest.fixture(scope="module")
def engines() -> Players:
    settings = load_settings({"torch_threads": 1, "default_simulations": 2, "limits": LIMITS})
    return Players(settings, Roots("runs", SHIPPED.parent))


def test_api_bodies(app):
    calling(app, fuzz_api, CASES["api"], seed=1)


def test_pdn_write_fields(app):
    calling(app, fuzz_pdn_write, CASES["pdn_write"], seed=2)


def test_engine_lines(engines):
    fuzz_engine(engines, CASES["engine"], seed=3)


def test_settings_values():
    fuzz_settings(CASES["settings"], seed=4)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 10^5 cases: about 10 minutes on two busy cores
def test_slow_lane(app, engines):
    calling(app, fuzz_api, CASES["api"] * SLOW_FACTOR, seed=11)
    calling(app, fuzz_pdn_write, CASES["pdn_write"] * SLOW_FACTOR, seed=12)
    fuzz_engine(engines, CASES["engine"] * SLOW_FACTOR, seed=13)
    fuzz_settings(CASES["settings"] * SLOW_FACTOR, seed=14)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_slow_lane_files_and_clients(hostile, slow_server):
    app, names = hostile

    async def fuzz(client: httpx.AsyncClient, cases: int, seed: int) -> None:
        await fuzz_run_files(client, cases, seed, names)

    calling(app, fuzz, RUN_CASES * SLOW_FACTOR, seed=16)
    before = rss_mb(slow_server.proc.pid)
    for wave in range(SLOW_FACTOR):
        fuzz_slow_clients(slow_server, SLOW_CLIENTS, seed=17 + wave)
    assert rss_mb(slow_server.proc.pid) - before < 100, "memory kept after slow clients"
