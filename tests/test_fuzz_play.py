"""Fuzzing the play surfaces: API bodies, PDN write fields, engine lines and play settings.

Every case is random (seeded, so a failure replays): valid requests with fields replaced,
dropped or added, values of every JSON kind and absurd size, move and FEN look-alikes. The
server is called in process (the ASGI app through httpx's ASGI transport, which raises any
exception a route lets out), the engine through its line handler, the settings through the
loader. The only outcomes allowed are an answer or a clean error: a JSON error object with a
4xx status (never a 500), an engine error line, a one-line ValueError for a setting.

The default lane runs 10^4 cases in all (under a minute here); ``-m slow`` runs 10^5.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import string
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from play_helpers import SHIPPED

from game.pdn import read_pdn
from play.__main__ import parse_overrides
from play.app import create_app
from play.engine import read_lines, serve
from play.paths import Roots
from play.players import Players
from play.settings import SCHEMA, load_settings

# Default lane: 10^4 cases in all; the slow lane ten times as many of each kind.
CASES = {"api": 4000, "pdn_write": 2000, "engine": 2000, "settings": 2000}
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
